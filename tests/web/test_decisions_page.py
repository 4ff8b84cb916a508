"""The experiment page shows each recommendation beside the fit it was decided on: a run whose recommendation is
"insufficient data" never sits beside a fitted ceiling, and the reason quotes the numbers in the table (the
incoherence of the old screenshot). The run page shows compute to reach a target and the ETAs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment, one_run_with_a_curve, post_curve

pytestmark = pytest.mark.browser


def _fmt3(v: float) -> str:
    return f"{v:.3f}"


def test_recommendations_agree_with_the_numbers_beside_them(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-decisions", grid={"batch.prompts": [32, 48, 64]})
        good, bad, short = exp["runs"]
        post_curve(api, good["id"], 0.7, n=30, seed=1)
        post_curve(api, bad["id"], 0.45, n=30, seed=2)
        post_curve(api, short["id"], 0.6, n=2, c_max=300.0, seed=3)  # too few points for any fit
        job = api.post(f"/api/v1/experiments/{exp['id']}/recommendations").json()
        recs = api.get(job["status_url"], params={"wait": 25}).json()["result"]["recommendations"]
    by_id = {r["run_id"]: r for r in recs}
    assert by_id[short["id"]]["action"] == "insufficient_data"
    assert by_id[bad["id"]]["action"] == "stop" and good["name"] in by_id[bad["id"]]["reason"]
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator(f'#runs tr[data-run-id="{short["id"]}"] td[data-col="recommendation"] .badge').wait_for()
    for run in (good, bad, short):
        rec = by_id[run["id"]]
        row = page.locator(f'#runs tr[data-run-id="{run["id"]}"]')
        a_cell = row.locator('td[data-col="A"]').inner_text()
        rec_cell = row.locator('td[data-col="recommendation"]').inner_text()
        assert rec["reason"] in rec_cell
        if rec["action"] == "insufficient_data":
            assert a_cell.strip() == "—", f"{run['name']}: a fitted A beside 'insufficient data': {a_cell!r}"
        else:
            assert _fmt3(rec["numbers"]["A"]) in a_cell, (a_cell, rec["numbers"]["A"])
            assert re.search(r"decided on a fit of \d+ evaluations", rec_cell)
    n = by_id[bad["id"]]["numbers"]
    assert f"{n['V_budget']:.3f} vs {n['leader_V_budget']:.3f}" in by_id[bad["id"]]["reason"]
    screenshot(page, "experiment-decisions")


def test_run_page_gives_compute_to_a_target(page: Any, live: LiveService) -> None:
    _, run = one_run_with_a_curve(live, "browser-reach", 0, 0.7, n=30, seed=4)
    page.goto(f"{live.url}/runs/{run['id']}")
    reach = page.locator("#reach")
    page.wait_for_function("() => /reaches|ceiling|no fit/.test(document.getElementById('reach').textContent)")
    page.get_by_label("Compute to reach pass rate").fill("0.6")
    page.get_by_role("button", name="Forecast").click()
    page.wait_for_function("() => document.getElementById('reach').textContent.includes('reaches 0.60')")
    assert "P(ever reached)" in reach.inner_text()
    page.get_by_label("Compute to reach pass rate").fill("0.95")
    page.get_by_role("button", name="Forecast").click()
    page.wait_for_function("() => document.getElementById('reach').textContent.includes('above the fitted ceiling')")
    screenshot(page, "run-reach")
