"""The dashboard in a real browser: submit a grid, see form errors by their field, watch the chart update live,
act on a run, and keep every page usable (screenshots saved under tests/artifacts/)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment, one_run_with_a_curve, post_curve
from tests.web.forms import field_error, open_new_experiment

pytestmark = pytest.mark.browser


def _chart_traces(page: Any) -> list[dict[str, Any]]:
    traces: list[dict[str, Any]] = page.evaluate(
        "() => (document.getElementById('chart').data || []).map(t => ({name: t.name, fill: t.fill || null,"
        " type: t.type, n: (t.x || []).length, dash: (t.line || {}).dash || null}))"
    )
    return traces


def test_submit_the_form_and_see_the_runs(page: Any, live: LiveService) -> None:
    page.goto(f"{live.url}/experiments/new")
    page.get_by_label("Name").fill("browser-loo")
    page.get_by_label("Leave-one-out of the preset").check()
    page.get_by_label("Budget per run").fill("300")
    page.get_by_role("button", name="Preview runs").click()
    preview = page.locator("#preview-table tbody tr")
    preview.first.wait_for()
    assert preview.count() == 7
    assert "7 runs · total compute 2,100 gpu_hours (300 each)" in page.locator("#preview-summary").inner_text()
    screenshot(page, "new-experiment")
    page.get_by_role("button", name="Create experiment").click()
    page.wait_for_url(re.compile(r"/experiments/\d+$"))
    rows = page.locator("#runs tbody tr")
    rows.first.wait_for()
    assert rows.count() == 7
    assert page.locator("#exp-name").inner_text() == "browser-loo"
    assert "base,seed=0" in rows.first.inner_text()
    # the page says which shape prior the forecasts use, and why (no finished run of this task and model here)
    prior = page.locator("#exp-prior").inner_text()
    assert prior.startswith("Forecasts: team prior: 0 succeeded run(s)") and "flat priors are used" in prior, prior


def test_form_errors_appear_next_to_their_field(page: Any, live: LiveService) -> None:
    open_new_experiment(page, live.url, {"Name": "browser-bad", "Budget per run": "-5"})
    page.locator("#axis-values-0").fill("0, 48")
    assert "greater than 0" in field_error(page, "Create experiment", "err-budget")
    assert page.get_by_label("Budget per run").get_attribute("aria-invalid") == "true"
    assert page.locator("#err-name").is_hidden()
    page.get_by_label("Budget per run").fill("300")
    assert "greater than 0" in field_error(page, "Preview runs", "err-axis-0")
    assert page.locator("#err-budget").is_hidden()
    screenshot(page, "new-experiment-errors")
    page.get_by_role("tab", name="YAML").click()
    bad_yaml = "name: browser-yaml\ntask: t\nmodel: m\nbudget: 10\nseeds: [x]\n"
    page.get_by_label("Grid document (YAML or JSON)").fill(bad_yaml)
    page.locator("#yaml-preview").click()
    page.locator("#yaml-errors li").first.wait_for()
    assert "seeds.0" in page.locator("#yaml-errors").inner_text()


def test_metrics_posted_through_the_api_update_the_chart_live(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-live", grid={"batch.prompts": [32, 48, 64]})
        page.goto(f"{live.url}/experiments/{exp['id']}")
        page.locator("#live.on").wait_for()
        page.evaluate("() => { window.__sameDocument = true; }")
        assert all(t["n"] == 0 for t in _chart_traces(page) if t["type"] == "scatter")
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.5 + 0.05 * i, n=12, c_max=2000.0, seed=i)
        page.wait_for_function(  # every run's 12 points (a run's burn-in points are a trace of their own)
            "() => (document.getElementById('chart').data || []).filter(t => t.mode === 'markers')"
            ".reduce((n, t) => n + t.x.length, 0) >= 36"
        )
        for i, run in enumerate(exp["runs"]):
            more = post_curve(api, run["id"], 0.5 + 0.05 * i, n=24, c_max=4000.0, seed=i)
            assert more["accepted"] > 0
    page.wait_for_function(
        "() => (document.getElementById('chart').data || []).filter(t => t.fill === 'tonexty').length >= 3",
        timeout=20_000,
    )
    traces = _chart_traces(page)
    assert any(t["dash"] == "dot" for t in traces), "extrapolations to the budget are dotted"
    assert page.evaluate("() => window.__sameDocument") is True, "the page was not reloaded"
    first = page.locator("#runs tbody tr").first
    assert re.search(r"0\.\d{3}", first.locator("td").nth(3).inner_text()), "the table shows the fitted A"
    page.locator("#comparison tbody tr").first.wait_for()
    page.locator("#rank-ceiling li a").first.wait_for()
    screenshot(page, "experiment")


def test_stop_a_run_from_its_button(page: Any, live: LiveService) -> None:
    exp, target = one_run_with_a_curve(live, "browser-stop", 1, 0.55, n=12, c_max=2000.0)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    row = page.locator(f'#runs tr[data-run-id="{target["id"]}"]')
    row.get_by_role("button", name="Stop").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert target["name"] in dialog.locator("h2").inner_text()
    screenshot(page, "stop-confirmation", full_page=False)
    dialog.get_by_role("button", name="Stop run").click()
    page.locator(f'#runs tr[data-run-id="{target["id"]}"][data-status="stopping"]').wait_for()
    with live.client() as api:
        assert api.get(f"/api/v1/runs/{target['id']}").json()["status"] == "stopping"
    other = page.locator(f'#runs tr[data-run-id="{exp["runs"][0]["id"]}"]')
    assert other.get_attribute("data-status") == "queued", "only the chosen run was stopped"


def test_run_page_shows_metrics_forecast_history_and_status(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-run", grid={"batch.prompts": [48]})
        run = exp["runs"][0]
        for k in (8, 16, 24, 32):
            post_curve(api, run["id"], 0.6, n=k, c_max=4000.0 * k / 32)
            if live.ctx.refitter is not None:
                live.ctx.drain(30)
    page.goto(f"{live.url}/runs/{run['id']}")
    page.locator("#facts dd").first.wait_for()
    page.wait_for_function("() => (document.getElementById('history').data || []).length === 4")
    for metric in ("train/reward_mean", "train/truncation_rate", "train/entropy", "train/staleness_mean"):
        page.locator(f'[data-metric="{metric}"] .main-svg').first.wait_for()
    assert page.locator("#transitions tbody tr").count() == 2
    history = page.evaluate("() => document.getElementById('history').data.map(t => t.x.length)")
    assert sum(history) >= 4, history
    # the run page says which fit its numbers come from (the experiment's grid fit; flat priors: no team history yet)
    facts = page.locator("#facts").inner_text()
    assert re.search(r"Fit used\s+.*flat priors", facts), facts
    assert re.search(r"Assessment\s+v\d+ of ", facts), facts
    screenshot(page, "run")


def test_list_and_settings_pages(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-list", grid={"batch.prompts": [32, 48]})
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.55 + 0.04 * i, seed=i)
        failed = api.post(
            f"/api/v1/runs/{exp['runs'][0]['id']}/status",
            json={"status": "failed", "reason": "browser-test: simulated trainer crash"},
        )
        assert failed.status_code == 200, failed.text
    if live.ctx.refitter is not None:
        live.ctx.drain(30)
    page.goto(live.url + "/")
    row = page.locator(f'#experiments tr[data-experiment-id="{exp["id"]}"]')
    row.wait_for()
    assert re.search(r"0\.\d{3}", row.locator("td").nth(4).inner_text()), "best forecast ceiling is listed"
    screenshot(page, "experiments")
    page.goto(f"{live.url}/alerts?experiment_id={exp['id']}")
    page.locator("#alerts tbody tr").first.wait_for()
    assert "browser-test: simulated trainer crash" in page.locator("#alerts").inner_text()
    screenshot(page, "alerts")
    page.goto(live.url + "/settings")
    page.get_by_label("API token", exact=True).fill(live.admin_token)
    page.get_by_role("button", name="Save token").click()
    page.locator("#tokens tbody tr").first.wait_for()
    assert "browser-test-write" in page.locator("#tokens").inner_text()
    page.get_by_label("Name", exact=True).last.fill("browser-hook")
    page.get_by_label("URL").fill(f"{live.url}/healthz")
    page.get_by_role("button", name="Add webhook").click()
    page.locator("#hook-secret").wait_for(state="visible")
    page.get_by_role("button", name="Send a test alert to browser-hook").click()
    page.get_by_text(re.compile(r"browser-hook: (delivered|not delivered)")).wait_for()
    assert live.admin_token not in page.content(), "the page never shows a stored secret"
    screenshot(page, "settings")


def test_two_hundred_runs_stay_usable(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(
            api, "browser-200", grid={"batch.prompts": list(range(8, 208))}, max_runs=200, budget=8000.0
        )
        assert len(exp["runs"]) == 200
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.45 + 0.2 * ((i * 37) % 200) / 200, n=40, seed=i)
    if live.ctx.refitter is not None:
        live.ctx.drain(60)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(199).wait_for(timeout=30_000)
    # the chart is redrawn when the assessment of the last points lands (a loaded machine takes a while)
    page.wait_for_function(
        "() => (document.getElementById('chart').data || []).filter(t => t.fill === 'tonexty').length === 8",
        timeout=60_000,
    )
    traces = _chart_traces(page)
    legend = page.evaluate("() => document.querySelectorAll('#chart .legend .traces').length")
    assert legend <= 9, f"legend shows the top 8 runs and one entry for the others, got {legend}"
    assert sum(t["n"] for t in traces) < 25_000
    assert sum(1 for t in traces if t["fill"] == "tonexty") == 8
    colors = page.evaluate(
        "() => (document.getElementById('chart').data || [])"
        ".filter(t => t.mode === 'markers' && t.showlegend !== false).map(t => t.marker.color)"
    )
    assert len(set(colors)) == len(colors), f"every highlighted run has its own colour: {colors}"
    screenshot(page, "experiment-200-runs", full_page=False)
    page.get_by_label("Filter").fill("batch.prompts=207")
    assert page.locator("#runs tbody tr").count() == 1


def test_user_text_is_shown_as_text_never_run(page: Any, live: LiveService) -> None:
    payload = '<img src=x onerror="window.__injected=1"> <b>bold</b>'
    with live.client() as api:
        exp = create_experiment(api, "browser-escape", grid={"batch.prompts": [32]}, description=payload)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.get_by_text(payload, exact=False).first.wait_for()
    page.goto(live.url + "/")
    page.locator(f'#experiments tr[data-experiment-id="{exp["id"]}"]').wait_for()
    assert payload in page.locator("#experiments").inner_text()
    assert page.evaluate("() => window.__injected") is None
    assert page.locator("#experiments img, #exp-meta img").count() == 0
