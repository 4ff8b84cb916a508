"""The engine's log of a run, from its run page (the tail, with the error highlighted for a failed run)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment

pytestmark = pytest.mark.browser

LOG = "\n".join(
    [
        *(f"step {i} loss {1 / (i + 1):.4f}" for i in range(200)),
        "Traceback (most recent call last):",
        '  File "runner.py", line 88, in run',
        "    trainer.step()",
        "RuntimeError: browser-test: simulated trainer crash",
        "",
    ]
)


def test_a_failed_runs_page_shows_its_log_with_the_error_highlighted(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-log", grid={"batch.prompts": [32, 48]})
        failed, other = exp["runs"]
        runs_dir = live.ctx.settings.runs_dir
        assert runs_dir is not None
        (runs_dir / f"run-{failed['id']}").mkdir(parents=True)
        (runs_dir / f"run-{failed['id']}" / "engine.log").write_text(LOG, encoding="utf-8")
        res = api.post(f"/api/v1/runs/{failed['id']}/status", json={"status": "failed", "reason": "engine exited 1"})
        assert res.status_code == 200, res.text
    page.goto(f"{live.url}/runs/{failed['id']}")
    log = page.locator("#log")
    log.wait_for(state="visible")  # a failed run shows its log at once
    errors = log.locator(".log-error")
    assert errors.count() == 4
    assert "RuntimeError: browser-test: simulated trainer crash" in errors.last.inner_text()
    assert "error line(s) highlighted" in page.locator("#log-note").inner_text()
    assert page.evaluate("() => document.getElementById('log').scrollTop") > 0, "scrolled to the error"
    page.locator("#log-card").scroll_into_view_if_needed()
    screenshot(page, "run-log", full_page=False)
    page.goto(f"{live.url}/runs/{other['id']}")  # a queued run: loaded on request; none written: it says why
    page.locator("#facts dd").first.wait_for()
    assert page.locator("#log").is_hidden()
    page.get_by_role("button", name="Show log").click()
    page.locator("#log-note", has_text="SCALERL_RUNS_DIR").wait_for()
