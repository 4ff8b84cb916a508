"""What the pages will not say as a plain number: the home page names no best ceiling below a leader still rising,
and the run page says when compute to reach a target lies far past the run's budget."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.helpers import curve_points
from tests.web.conftest import LiveService, screenshot
from tests.web.data import assessed, create_experiment, post_curve

pytestmark = pytest.mark.browser


def test_the_home_page_says_the_leaders_are_still_rising_instead_of_a_best_ceiling(
    page: Any, live: LiveService
) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-leaders-rising", grid={"batch.prompts": [16, 32]})
        flat, rising = (r["id"] for r in exp["runs"])
        post_curve(api, flat, 0.45, n=40, c_max=8000.0, seed=1)
        steep = [{"step": 10 * (i + 1), "compute": 200.0 * (i + 1), "pass_rate": 0.2 + 0.03 * i} for i in range(12)]
        api.post(f"/api/v1/runs/{rising}/metrics", json={"points": steep}).raise_for_status()
        a = assessed(api, exp["id"])
    table = {r["id"]: r for r in a["runs"]}
    assert table[rising]["rank_at_budget"] == 1 and not table[rising]["ceiling_identified"], table[rising]
    page.goto(f"{live.url}/")
    row = page.locator(f'tr[data-experiment-id="{exp["id"]}"]')
    row.locator("[data-ceiling-note]").wait_for()
    text = row.inner_text()
    assert "leaders still rising" in text and f"not named: {table[rising]['name']}" in text, text
    screenshot(page, "home-leaders-rising")


def test_the_run_page_marks_compute_to_reach_far_past_the_budget_as_an_extrapolation(
    page: Any, live: LiveService
) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-reach-far", grid={"batch.prompts": [16, 32]}, budget=400.0)
        run = exp["runs"][0]
        points = curve_points(A=0.7, B=1.2, C_mid=300.0, n=30, c_max=400.0, seed=5)
        api.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": points}).raise_for_status()
    page.goto(f"{live.url}/runs/{run['id']}")
    page.wait_for_function("() => /reaches|ceiling|no fit/.test(document.getElementById('reach').textContent)")
    page.get_by_label("Compute to reach pass rate").fill("0.69")
    page.get_by_role("button", name="Forecast").click()
    page.wait_for_function("() => document.getElementById('reach').textContent.includes('reaches 0.69')")
    text = page.locator("#reach").inner_text()
    assert "reaches 0.69 at ≈ " in text and "far beyond this run's budget of 400 gpu_hours" in text, text
    assert "an extrapolation" in text
    page.get_by_label("Compute to reach pass rate").fill("0.50")
    page.get_by_role("button", name="Forecast").click()
    page.wait_for_function("() => document.getElementById('reach').textContent.includes('reaches 0.50')")
    assert "far beyond" not in page.locator("#reach").inner_text()
    screenshot(page, "run-reach-far")
