"""The dashboard's read models (``/api/v1/dashboard``) and page serving, over HTTP against the live test server."""

from __future__ import annotations

import httpx
import numpy as np

from server.assess.charts.downsample import log_x, lttb, per_run_budget
from tests.web.conftest import LiveService
from tests.web.data import assessed, create_experiment, post_curve


def test_lttb_keeps_the_ends_and_the_shape() -> None:
    x = np.linspace(1.0, 1000.0, 5000)
    y = 1 / (1 + (300.0 / x) ** 2)
    idx = lttb(log_x(x), y, 100)
    assert idx[0] == 0 and idx[-1] == x.size - 1
    assert len(idx) <= 100 and np.all(np.diff(idx) > 0)
    assert np.max(np.abs(np.interp(x, x[idx], y[idx]) - y)) < 0.02
    assert list(lttb(x[:5], y[:5], 100)) == [0, 1, 2, 3, 4]
    assert per_run_budget(200, 20_000, 200) == 100 and per_run_budget(3, 20_000, 200) == 200
    assert per_run_budget(5000, 20_000, 200) == 30


def test_chart_ranks_downsamples_and_bands_only_the_highlighted(live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "api-chart", grid={"batch.prompts": [32, 48, 64]})
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.5 + 0.06 * i, n=60, seed=i)
        assessed(api, exp["id"])
        chart = api.get(f"/api/v1/dashboard/experiments/{exp['id']}/chart", params={"max_points": 10, "highlight": 1})
    assert chart.status_code == 200, chart.text
    body = chart.json()
    runs = {r["name"]: r for r in body["runs"]}
    assert [r["index"] for r in body["runs"]] == [0, 1, 2]
    best = max(body["runs"], key=lambda r: r["A"])
    assert best["rank_ceiling"] == 1 and best["highlighted"] and best["band"] is not None
    assert sum(r["highlighted"] for r in body["runs"]) == 1
    assert all(r["band"] is None for r in body["runs"] if not r["highlighted"])
    for r in runs.values():
        assert r["points_total"] == 60 and len(r["points"]["x"]) == 30, "downsampled to the per-run floor of 30"
        assert r["points"]["x"][0] == r["fitted"]["x"][0] and r["points"]["y"][-1] is not None
        assert r["extrapolation"]["x"][0] == r["fitted"]["x"][-1]
        assert abs(r["extrapolation"]["x"][-1] - r["budget"]) < 1e-6 * r["budget"]
        assert r["at_budget"]["lo"] <= r["at_budget"]["mean"] <= r["at_budget"]["hi"]
        assert r["A_lo"] <= r["A"] <= r["A_hi"]
    assert sorted(r["rank_at_budget"] for r in body["runs"]) == [1, 2, 3]
    assert body["last_event_id"] > 0


def test_comparison_against_the_leave_one_out_base(live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "api-loo", leave_one_out=True)
        for i, run in enumerate(exp["runs"]):
            a = 0.6 if run["name"].startswith("base,") else (0.5 if i == 1 else 0.6)
            post_curve(api, run["id"], a, seed=i)
        assessed(api, exp["id"])
        out = api.get(f"/api/v1/dashboard/experiments/{exp['id']}/comparison").json()
    assert out["reference_kind"] == "base" and out["reference_name"] == "base,seed=0"
    assert len(out["rows"]) == len(exp["runs"]) - 1
    by_name = {r["run_name"]: r for r in out["rows"]}
    lowered = by_name[exp["runs"][1]["name"]]
    assert (lowered["effect"], lowered["direction"]) == ("ceiling", "worse"), lowered
    assert all(r["effect"] in ("ceiling", "efficiency", "not_shown", "none", "unknown") for r in out["rows"])
    assert by_name["loo-loss-dapo,seed=0"]["changes"] == {"loss.type": "dapo"}


def test_comparison_names_what_differs_from_the_best_run(live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "api-grid-cmp", grid={"batch.prompts": [32, 64]})
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.5 + 0.1 * i, seed=i)
        assessed(api, exp["id"])
        out = api.get(f"/api/v1/dashboard/experiments/{exp['id']}/comparison").json()
    assert out["reference_kind"] == "best" and out["reference_name"] == "batch.prompts=64,seed=0"
    (row,) = out["rows"]
    assert row["changes"] == {"batch.prompts": 32} and (row["effect"], row["direction"]) == ("ceiling", "worse")


def test_run_series_history_and_experiment_summary(live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "api-run", grid={"batch.prompts": [32, 48]})
        run = exp["runs"][0]
        for n in (8, 16, 24):
            post_curve(api, run["id"], 0.6, n=n, c_max=4000.0 * n / 24)
        post_curve(api, exp["runs"][1]["id"], 0.5, seed=3)
        if live.ctx.refitter is not None:
            assert live.ctx.drain(30)
        series = api.get(f"/api/v1/dashboard/runs/{run['id']}/series", params={"max_points": 10}).json()
        history = api.get(f"/api/v1/dashboard/runs/{run['id']}/fit-history").json()
        summaries = api.get("/api/v1/dashboard/experiments").json()
    assert set(series["metrics"]) >= {"train/reward_mean", "train/entropy", "train/staleness_mean"}
    assert len(series["metrics"]["train/entropy"]["x"]) == 10 and series["points_total"] == 24
    assert len(series["points"]["x"]) == 10 and series["fit_status"] == "ok"
    kinds = [s["kind"] for s in history["snapshots"]]
    assert kinds.count("point") >= 2 and "full" in kinds
    assert all(s["at_budget"] is not None for s in history["snapshots"] if s["A"] is not None)
    assert history["observed_latest"] is not None and history["observed_at_budget"] is None
    mine = next(s for s in summaries if s["id"] == exp["id"])
    assert mine["best"]["run_id"] == run["id"] and mine["n_runs"] == 2
    assert mine["status_counts"] == {"running": 2}


def test_reads_need_a_token_but_pages_hold_no_data(live: LiveService) -> None:
    with httpx.Client(base_url=live.url, timeout=10) as anon:
        assert anon.get("/api/v1/dashboard/experiments").status_code == 401
        assert anon.get("/api/v1/dashboard/runs/1/series").status_code == 401
        page = anon.get("/")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        assert "<table" in page.text and "srl_" not in page.text
        plotly = anon.get("/static/plotly.min.js")
        assert plotly.status_code == 200 and plotly.headers["content-type"].startswith("text/javascript")
        assert len(plotly.content) > 1_000_000
        assert anon.get("/static/core.js").status_code == 200
        assert anon.get("/static/..%2Fapp.py").status_code == 404
        assert anon.get("/static/router.py").status_code == 404
        bad_id = anon.get("/experiments/0")  # no such page: the HTML 404 page, not a raw 422
        assert bad_id.status_code == 404 and bad_id.headers["content-type"].startswith("text/html")
    with live.client(live.read_token) as reader:
        assert reader.get("/api/v1/dashboard/experiments").status_code == 200
        assert reader.get("/api/v1/dashboard/experiments/999999/chart").status_code == 404
