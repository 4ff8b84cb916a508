"""One truth per experiment: every surface reads one stored assessment, reads never fit, and the CI gate
cannot pass before the runs that could still win have a forecast."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from rl_core.scaling.fit.calibration import load_calibration
from server.store.alert_models import Alert
from tests.server.conftest import Service
from tests.server.helpers import curve_points, finish_run, post_points


def _grid(service: Service, n: int = 7, **extra: Any) -> dict[str, Any]:
    doc = {
        "name": f"loo-{n}",
        "preset": "scalerl",
        "grid": {"batch.prompts": [16 + 8 * i for i in range(n)]},
        "seeds": [0],
        "task": "gsm8k",
        "model": "tiny",
        "budget": 8000.0,
        **extra,
    }
    r = service.client.post("/api/v1/experiments", json=doc, headers=service.write)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _get(service: Service, path: str, **params: Any) -> Any:
    r = service.client.get(path, headers=service.read, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_gate_waits_for_queued_runs_the_demo_situation(service: Service) -> None:
    """Two of seven runs finished far apart, five still queued: the old gate said 'decided, P = 1.00'."""
    exp = _grid(service)
    a, b = exp["runs"][0]["id"], exp["runs"][1]["id"]
    post_points(service, a, curve_points(A=0.7, n=40, seed=1))
    post_points(service, b, curve_points(A=0.45, n=40, seed=2))
    finish_run(service, a)
    finish_run(service, b)
    _get(service, f"/api/v1/experiments/{exp['id']}/assessment")  # a read schedules the new state's assessment
    service.drain()
    v = _get(service, f"/api/v1/experiments/{exp['id']}/verdict")
    assert v["decided"] is False and v["best_run_id"] == a, v["reason"]
    assert len(v["waiting_for"]) == 5 and "waiting for" in v["reason"], v
    assert v["assessment_version"] >= 1 and v["finished"] is False
    early = _get(service, f"/api/v1/experiments/{exp['id']}/verdict", decide_early="true")
    assert early["decided"] is True and "decided early, ignoring" in early["reason"]


def test_a_gate_decides_once_every_run_has_a_forecast(service: Service) -> None:
    exp = _grid(service, n=3)
    ids = [r["id"] for r in exp["runs"]]
    for run_id, a in zip(ids, (0.7, 0.45, 0.4), strict=True):
        post_points(service, run_id, curve_points(A=a, n=40, seed=run_id))
    service.drain()
    v = _get(service, f"/api/v1/experiments/{exp['id']}/verdict")
    assert v["decided"] is True and v["waiting_for"] == [] and v["best_run_id"] == ids[0], v["reason"]


def test_reads_never_fit(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = _grid(service, n=3)
    for k, r in enumerate(exp["runs"]):
        post_points(service, r["id"], curve_points(A=0.5 + 0.1 * k, n=30, seed=k))
    service.drain()
    pool = service.ctx.cache._pool
    calls: list[str] = []
    monkeypatch.setattr(pool, "full_fit", lambda *a, **k: calls.append("full"))  # type: ignore[arg-type]
    monkeypatch.setattr(pool, "grid_fit", lambda *a, **k: calls.append("grid"))  # type: ignore[arg-type]
    service.ctx.cache._fits.clear()
    service.ctx.cache._grids.clear()
    service.ctx.cache._prefix.clear()
    e = exp["id"]
    for path in (
        f"/api/v1/experiments/{e}/verdict",
        f"/api/v1/experiments/{e}/assessment",
        f"/api/v1/dashboard/experiments/{e}/chart",
        f"/api/v1/dashboard/experiments/{e}/comparison",
        f"/api/v1/dashboard/runs/{exp['runs'][0]['id']}/series",
        "/api/v1/dashboard/experiments",
        f"/api/v1/experiments/{e}/recommendations",
    ):
        _get(service, path)
    assert calls == []


def test_every_surface_shows_the_assessments_numbers(service: Service) -> None:
    exp = _grid(service, n=4)
    e = exp["id"]
    for k, r in enumerate(exp["runs"]):
        post_points(service, r["id"], curve_points(A=0.45 + 0.08 * k, n=12 + 6 * k, c_max=2000.0 + 1500 * k, seed=k))
    service.drain()
    a = _get(service, f"/api/v1/experiments/{e}/assessment")
    chart = _get(service, f"/api/v1/dashboard/experiments/{e}/chart")
    v = _get(service, f"/api/v1/experiments/{e}/verdict")
    card = _get(service, f"/api/v1/dashboard/experiments/{e}/comparison")
    home = {x["id"]: x for x in _get(service, "/api/v1/dashboard/experiments")}[e]
    assert chart["assessment_version"] == a["version"] == v["assessment_version"] >= 1
    table = {r["id"]: r for r in a["runs"]}
    for run in chart["runs"]:
        row = table[run["id"]]
        assert (run["A"], run["A_lo"], run["A_hi"], run["B"], run["C_mid"]) == (
            row["A"], row["A_lo"], row["A_hi"], row["B"], row["C_mid"]
        )  # fmt: skip
        for lo, mid, hi in ((row["A_lo"], row["A"], row["A_hi"]), (row["V_lo"], row["V_budget"], row["V_hi"])):
            if lo is not None and mid is not None:
                assert lo <= mid <= hi, row
        if row["V_budget"] is not None and run["at_budget"] is not None:
            assert run["at_budget"]["mean"] == row["V_budget"]
            if run["extrapolation"] is not None:
                assert run["extrapolation"]["y"][-1] == pytest.approx(row["V_budget"], abs=1e-5)
        if row["A"] is not None and row["V_budget"] is not None and row["ceiling_identified"]:
            assert row["V_budget"] <= row["A"] + 1e-9  # the forecast never exceeds the ceiling
        if row["V_budget"] is not None:  # the page says which forecast it shows
            assert load_calibration().version in row["forecast"]
            assert ("sigmoid" in row["forecast"]) and ("power law" in row["forecast"])
    for ranked in v["ranking"]:
        assert ranked["V_budget"] == table[ranked["run_id"]]["V_budget"]
        assert ranked["A"] == table[ranked["run_id"]]["A"]
    for row in card["rows"]:
        if row["A_run"] is not None:
            assert row["A_run"] == table[row["run_id"]]["A"]
        if row["effect"] in ("ceiling", "efficiency", "none"):
            assert row["A_diff"] == pytest.approx(row["A_run"] - row["A_ref"])
    assert card["fit"] == a["fit"] and "grid fit" in a["fit"]
    assert home["recommendations"] == a["counts"]
    best = [r for r in a["runs"] if r["rank_ceiling"] == 1]
    ahead = [
        r for r in a["runs"] if r["rank_at_budget"] is not None and r["rank_at_budget"] < best[0]["rank_at_budget"]
    ]
    if all(r["ceiling_identified"] for r in ahead):
        assert home["best"]["A"] == best[0]["A"]
    else:  # a leader on value is still rising: no best ceiling is named below it
        assert home["best"] is None and home["ceiling_note"].startswith("not named: ")


def test_a_finished_experiment_counts_no_advice(service: Service) -> None:
    exp = _grid(service, n=2)
    for k, r in enumerate(exp["runs"]):
        post_points(service, r["id"], curve_points(A=0.5 + 0.1 * k, n=30, seed=k))
        finish_run(service, r["id"])
    _get(service, f"/api/v1/experiments/{exp['id']}/assessment")
    service.drain()
    a = _get(service, f"/api/v1/experiments/{exp['id']}/assessment")
    home = {x["id"]: x for x in _get(service, "/api/v1/dashboard/experiments")}[exp["id"]]
    assert a["counts"] == {} and home["recommendations"] == {}
    assert all(r["eta_budget_seconds"] is None for r in a["runs"])
    assert a["verdict"]["finished"] is True


def test_an_unidentified_ceiling_is_never_a_number_on_the_card(service: Service) -> None:
    exp = _grid(service, n=2)
    a, b = (r["id"] for r in exp["runs"])
    post_points(service, a, curve_points(A=0.7, n=40, seed=1))
    # a straight early climb: its ceiling runs to the A = 1 bound
    post_points(
        service, b, [{"step": 10 * (i + 1), "compute": 50.0 * (i + 1), "pass_rate": 0.1 + 0.01 * i} for i in range(8)]
    )
    service.drain()
    card = _get(service, f"/api/v1/dashboard/experiments/{exp['id']}/comparison")
    table = {r["id"]: r for r in _get(service, f"/api/v1/experiments/{exp['id']}/assessment")["runs"]}
    for row in card["rows"]:
        unidentified = [i for i in (row["run_id"], card["reference_id"]) if not table[i]["ceiling_identified"]]
        if unidentified:
            assert row["effect"] == "unknown" and row["A_diff"] is None and "not identified" in row["reason"]


def test_a_withdrawn_stop_alert_is_resolved_with_the_reason(service: Service) -> None:
    from server.alerts.hooks import _on_recommendations
    from server.store.models import RecommendationSnapshot, Run

    exp = _grid(service, n=2)
    run_id = exp["runs"][0]["id"]
    post_points(service, run_id, curve_points(A=0.5, n=10, seed=1))
    with service.ctx.sessions.begin() as session:
        stop = [{"run_id": run_id, "run_name": "x", "action": "stop", "rule": "rung", "reason": "rung", "numbers": {}}]
        _on_recommendations(session, RecommendationSnapshot(experiment_id=exp["id"], body=stop))
        go = [
            {"run_id": run_id, "run_name": "x", "action": "continue", "rule": "", "reason": "on track", "numbers": {}}
        ]
        _on_recommendations(session, RecommendationSnapshot(experiment_id=exp["id"], body=go))
    with service.ctx.sessions() as session:
        alert = session.scalars(select(Alert).where(Alert.run_id == run_id)).one()
        assert session.get(Run, run_id) is not None
        assert alert.resolved_at is not None and alert.resolution is not None
        assert "now continue: on track" in alert.resolution
    listed = _get(service, "/api/v1/alerts", run_id=run_id)
    assert listed[0]["resolution"].startswith("withdrawn by the next assessment")


def test_one_compute_unit_per_experiment(service: Service) -> None:
    exp = _grid(service, n=2)
    bad = service.client.post(
        "/api/v1/runs",
        json={"name": "tok", "experiment_id": exp["id"], "compute_unit": "tokens"},
        headers=service.write,
    )
    assert bad.status_code == 422 and "gpu_hours" in bad.text and "tokens" in bad.text
    ids = []
    for name, unit, a in (("gpu", "gpu_hours", 0.7), ("tok", "tokens", 0.4)):
        r = service.client.post("/api/v1/runs", json={"name": name, "compute_unit": unit}, headers=service.write)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
        post_points(service, ids[-1], curve_points(A=a, n=30, seed=len(ids)))
    service.drain()
    default_id = service.client.get(f"/api/v1/runs/{ids[0]}", headers=service.read).json()["experiment_id"]
    v = _get(service, f"/api/v1/experiments/{default_id}/verdict")
    assert v["decided"] is False and "different units" in v["reason"] and "tokens: tok" in v["reason"]


def test_the_raw_posterior_policy_shows_and_compares_the_raw_forecast(service: Service) -> None:
    """``policy.forecast_comparison: raw``: decisions and pages read the sigmoid's raw posterior, and say so."""
    exp = _grid(service, n=2, policy={"forecast_comparison": "raw"})
    for k, r in enumerate(exp["runs"]):
        post_points(service, r["id"], curve_points(A=0.5 + 0.1 * k, n=14, c_max=2500.0, seed=k))
    service.drain()
    a = _get(service, f"/api/v1/experiments/{exp['id']}/assessment")
    rows = [r for r in a["runs"] if r["V_budget"] is not None]
    assert rows
    for row in rows:
        assert row["forecast"].startswith("the sigmoid's raw posterior")
        assert row["V_lo"] <= row["V_budget"] <= row["V_hi"]
    bad = service.client.post(
        "/api/v1/experiments",
        json={"name": "x", "preset": "scalerl", "task": "gsm8k", "model": "tiny", "budget": 10.0,
              "policy": {"forecast_comparison": "maybe"}},
        headers=service.write,
    )  # fmt: skip
    assert bad.status_code == 422 and "forecast_comparison" in bad.text


def test_the_home_page_names_no_best_ceiling_below_a_leader_still_rising(service: Service) -> None:
    exp = _grid(service, n=2)
    flat, rising = (r["id"] for r in exp["runs"])
    post_points(service, flat, curve_points(A=0.45, n=40, seed=1))  # saturated: its ceiling is identified
    # a steep climb with no bend yet: its ceiling is not identified, and it leads on value at the budget
    steep = [{"step": 10 * (i + 1), "compute": 200.0 * (i + 1), "pass_rate": 0.2 + 0.03 * i} for i in range(12)]
    post_points(service, rising, steep)
    service.drain()
    a = _get(service, f"/api/v1/experiments/{exp['id']}/assessment")
    table = {r["id"]: r for r in a["runs"]}
    assert table[flat]["rank_ceiling"] == 1 and table[flat]["ceiling_identified"], table[flat]
    assert table[rising]["rank_at_budget"] == 1 and not table[rising]["ceiling_identified"], table[rising]
    assert a["verdict"]["best_run_id"] == rising  # the verdict's order
    home = {x["id"]: x for x in _get(service, "/api/v1/dashboard/experiments")}[exp["id"]]
    assert home["best"] is None, home
    note = home["ceiling_note"]
    assert note.startswith(f"not named: {table[rising]['name']}, ahead on value at the budget, has a ceiling")
    assert "not identified yet (still rising)" in note and table[flat]["name"] in note
