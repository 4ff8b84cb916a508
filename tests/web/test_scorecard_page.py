"""The experiment page's scorecard shows the REST scorecard's own numbers (what the stops saved, the summary line,
one row per run with its outcome), as text: run names that are HTML stay text."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.helpers import curve_points
from tests.web.conftest import LiveService, screenshot
from tests.web.data import assessed, create_experiment, post_curve

pytestmark = pytest.mark.browser

IMG = '<img src=x onerror="window.__injected=1">'
LINK = '<a href="https://evil.example/">x</a>'


def test_the_page_shows_the_scorecard_of_the_stored_assessment(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-scorecard", grid={"length.interruption.phrase": [IMG, LINK]})
        kept, stopped = (r["id"] for r in exp["runs"])
        points = curve_points(0.8, n=24, c_max=8000.0, seed=1)
        for part in (points[:8], points[8:12], points[12:]):  # assessed at 33%, 50% and 100% of its budget
            assert api.post(f"/api/v1/runs/{kept}/metrics", json={"points": part}).is_success
            assessed(api, exp["id"])
        post_curve(api, stopped, 0.4, n=8, c_max=2000.0, seed=2)
        assert api.post(f"/api/v1/runs/{stopped}/stop", json={"reason": "behind"}).is_success
        assert api.post(f"/api/v1/runs/{kept}/status", json={"status": "succeeded", "reason": "done"}).is_success
        version = assessed(api, exp["id"])["version"]
        card = api.get(f"/api/v1/experiments/{exp['id']}/scorecard").json()
    assert card["assessment_version"] == version and card["saved"] == pytest.approx(6000.0)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function(
        "(v) => (document.getElementById('scorecard-as-of') || {}).textContent.startsWith(`assessment v${v}`)",
        arg=version,
    )
    seen = page.evaluate(
        """() => ({
          summary: document.getElementById('scorecard-summary').textContent,
          saved: Number(document.getElementById('scorecard-saved').dataset.saved),
          savedText: document.getElementById('scorecard-saved').textContent,
          rows: [...document.querySelectorAll('#scorecard-runs tbody tr')].map((tr) => ({
            id: Number(tr.dataset.runId), name: tr.querySelector('a').textContent,
            saved: tr.querySelector('[data-col=saved]').textContent,
            outcome: tr.querySelector('[data-col=outcome]').textContent })),
        })"""
    )
    assert seen["summary"] == card["summary"], seen
    assert seen["saved"] == card["saved"] and "6,000 gpu_hours (38%) saved" in seen["savedText"]
    rows = {r["id"]: r for r in seen["rows"]}
    names = {g["run_id"]: g["run_name"] for g in card["runs"]}
    assert {i: r["name"] for i, r in rows.items()} == names and IMG in names[kept]  # the names, as text
    assert rows[stopped]["saved"] == "6,000" and rows[stopped]["outcome"].startswith("stopped at 25%")
    assert rows[kept]["outcome"].startswith("ended at ")
    early = {f["milestone"]: f for f in next(g for g in card["runs"] if g["run_id"] == kept)["early"]}
    assert set(early) == {0.3, 0.5}, card
    for col, m in (("at30", 0.3), ("at50", 0.5)):
        shown = page.locator(f'#scorecard-runs tr[data-run-id="{kept}"] [data-col={col}]').text_content()
        inside = "inside its band" if early[m]["inside"] else "outside its band"
        assert shown.startswith(f"{early[m]['value']:.3f} [") and inside in shown, shown
    assert page.evaluate("() => window.__injected") is None and page.locator("#scorecard img").count() == 0
    page.locator("#scorecard").scroll_into_view_if_needed()
    screenshot(page, "experiment-scorecard", full_page=False)
