"""No dead ends, in a real browser: a sign-in page instead of an API error and "connecting…" forever,
read-only pages for a read-only token, an HTML 404 for unknown pages and objects, and action errors kept next to
their control until dismissed."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment, post_curve
from tests.web.forms import open_new_experiment

pytestmark = pytest.mark.browser


@pytest.fixture
def signed_in(browser: Any) -> Iterator[Callable[[str | None], Any]]:
    """Pages of browser contexts signed in with a given token (None: nothing stored); no uncaught page error."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(token: str | None) -> Any:
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        if token is not None:
            context.add_init_script(f"localStorage.setItem('scalerl.token', {token!r});")
        context.set_default_timeout(10_000)
        contexts.append(context)
        pg = context.new_page()
        pg.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        return pg

    yield make
    for c in contexts:
        c.close()
    assert not errors, errors


def test_no_token_leads_to_a_sign_in_page_and_back(signed_in: Callable[[str | None], Any], live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-signin", grid={"batch.prompts": [32]})
    page = signed_in(None)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_url(re.compile(r"/signin\?next="))
    card = page.locator(".signin-card")
    text = card.inner_text()
    assert "scalerl token create" in text and "#token=" in text and "demo" in text
    assert "No API token is saved" in page.locator("#signin-reason").inner_text()
    assert page.locator("#live").count() == 0, "no 'connecting…' left waiting"
    screenshot(page, "signin")
    page.get_by_label("API token", exact=True).fill("srl_not-a-token")
    page.get_by_role("button", name="Sign in").click()
    error = page.locator("#signin-error")
    error.wait_for(state="visible")
    assert "invalid or revoked" in error.inner_text()
    page.get_by_label("API token", exact=True).fill(live.read_token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live.url}/experiments/{exp['id']}")
    page.locator("#exp-name", has_text="browser-signin").wait_for()


def test_a_revoked_token_is_sent_to_sign_in_with_the_reason(
    signed_in: Callable[[str | None], Any], live: LiveService
) -> None:
    page = signed_in("srl_revoked-or-never-issued")
    page.goto(f"{live.url}/alerts")
    page.wait_for_url(re.compile(r"/signin\?next=%2Falerts"))
    assert "was refused (invalid or revoked API token)" in page.locator("#signin-reason").inner_text()


def test_a_read_only_token_sees_read_only_pages(signed_in: Callable[[str | None], Any], live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-readonly", grid={"batch.prompts": [32, 48]})
        post_curve(api, exp["runs"][0]["id"], 0.6, n=12, c_max=2000.0)
    page = signed_in(live.read_token)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(1).wait_for()
    assert page.locator("#runs tbody button").count() == 0, "no Stop/Extend/Resume buttons for a read-only token"
    assert "(read-only)" in page.locator("#auth-state").inner_text()
    page.goto(f"{live.url}/runs/{exp['runs'][0]['id']}")
    page.locator("#facts dd").first.wait_for()
    assert page.locator("#run-actions button").count() == 0
    page.goto(f"{live.url}/experiments/new")
    page.locator("#readonly-note").wait_for(state="visible")
    assert page.get_by_role("button", name="Preview runs").first.is_disabled()
    assert page.locator("#submit").is_disabled()
    page.goto(f"{live.url}/settings")
    page.locator("#token-scope").wait_for()
    assert page.locator("#token-scope").inner_text() == "read"
    assert "browser-test-read" in page.locator("#signin-state").inner_text()

    writer = signed_in(live.write_token)  # the same pages with a write token keep their controls
    writer.goto(f"{live.url}/experiments/{exp['id']}")
    writer.locator("#runs tbody tr button").first.wait_for()
    assert writer.locator('#runs button[data-action="extend"]').count() == 2


def test_unknown_pages_and_objects_say_they_do_not_exist(
    signed_in: Callable[[str | None], Any], live: LiveService
) -> None:
    page = signed_in(live.read_token)
    resp = page.goto(f"{live.url}/no/such/page")
    assert resp is not None and resp.status == 404 and resp.headers["content-type"].startswith("text/html")
    assert "Page not found" in page.locator("h1").inner_text() and "/no/such/page" in page.inner_text("main")
    for path in ("/experiments/abc", "/runs/0", "/experiments/99999999999999999999999"):
        resp = page.goto(live.url + path)
        assert resp is not None and resp.status == 404, path
    api = httpx.get(f"{live.url}/api/v1/nothing-here", headers={"Accept": "text/html"})  # the API stays JSON
    assert api.status_code == 404 and api.json() == {"detail": "Not Found"}
    page.goto(f"{live.url}/experiments/999999")
    page.locator("[data-not-found] h1").wait_for()
    assert page.locator("[data-not-found] h1").inner_text() == "Experiment 999999 does not exist"
    assert page.locator("#banner").is_hidden() and page.locator("#live").count() == 0
    screenshot(page, "experiment-not-found")
    page.goto(f"{live.url}/runs/999999")
    page.locator("[data-not-found] h1", has_text="Run 999999 does not exist").wait_for()


def test_an_action_error_stays_next_to_its_control_until_dismissed(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-extend-error", grid={"batch.prompts": [32, 48]})
        target, other = exp["runs"]
        post_curve(api, target["id"], 0.55, n=12, c_max=2000.0)
        page.goto(f"{live.url}/experiments/{exp['id']}")
        page.locator("#live.on").wait_for()
        row = page.locator(f'#runs tr[data-run-id="{target["id"]}"]')
        row.get_by_role("button", name="Extend").click()
        dialog = page.locator("dialog#confirm")
        dialog.wait_for(state="visible")
        assert re.search(r"compute used 2,000\b", dialog.inner_text()), dialog.inner_text()
        dialog.get_by_label("New budget").fill("10")
        dialog.get_by_role("button", name="Set budget").click()
        error = row.locator(".action-error")
        error.wait_for()
        assert "Extend failed: budget 10 is below the compute already used (2000)" in error.inner_text()
        assert page.locator("#banner").is_hidden(), "not at the top of the page"
        # Live refreshes (new points of another run) redraw the table; the error stays.
        post_curve(api, other["id"], 0.5, n=12, c_max=2000.0)
        page.locator(f'#runs tr[data-run-id="{other["id"]}"][data-status="running"]').wait_for()
        page.wait_for_timeout(1500)
        assert row.locator(".action-error").count() == 1
    screenshot(page, "action-error", full_page=False)
    row.get_by_role("button", name="Dismiss this error").click()
    row.locator(".action-error").wait_for(state="detached")


def test_the_preview_warns_of_too_few_evaluations_and_offers_the_demos_recipe(page: Any, live: LiveService) -> None:
    task, model = "browser-eval-task", "browser-eval-model"
    with live.client() as api:  # an earlier run of this task and model: 6 evaluations in 1,000 units
        exp = create_experiment(api, "browser-eval-history", task=task, model=model, budget=1000.0)
        points = [{"step": 10 * i, "compute": 1000.0 * i / 6, "pass_rate": 0.2 + 0.05 * i} for i in range(1, 7)]
        api.post(f"/api/v1/runs/{exp['runs'][0]['id']}/metrics", json={"points": points}).raise_for_status()
    fields = {"Name": "browser-too-few", "Task": task, "Model": model, "Budget per run": "500"}
    open_new_experiment(page, live.url, fields)
    page.get_by_role("button", name="Preview runs").first.click()
    warning = page.locator("#preview-warnings li")
    warning.first.wait_for()
    assert (
        "about 3.0 evaluations" in warning.first.inner_text() and "a fit needs at least 4" in warning.first.inner_text()
    )
    assert "raise the budget" in page.locator("#err-budget").inner_text(), "also next to the budget field"
    screenshot(page, "new-experiment-too-few-evaluations")
    page.get_by_label("Budget per run").fill("2000")
    page.get_by_role("button", name="Preview runs").first.click()
    page.locator("#preview-warnings").wait_for(state="hidden")
    assert "About 12.0 evaluations a run" in page.locator("#preview-evaluations").inner_text()
    # which shape prior the forecasts would use: no finished run of this task and model yet, so flat priors
    prior = page.locator("#preview-prior").inner_text()
    assert "team prior: 0 succeeded run(s)" in prior and "flat priors are used" in prior, prior
    # The demo's two grids, in the YAML tab: the learning-rate grid (4 runs, stops on) and the leave-one-out (7 runs).
    page.get_by_role("button", name="Start from the demo's lr grid").first.click()
    text = page.get_by_label("Grid document (YAML or JSON)").input_value()
    assert "optimizer.lr:" in text and "mode: auto_stop" in text and "synthetic-addition" in text, text
    page.locator("#yaml-preview").click()
    page.locator("#preview-summary", has_text="4 runs").wait_for()
    page.get_by_role("button", name="Start from the demo's leave-one-out grid").first.click()
    text = page.get_by_label("Grid document (YAML or JSON)").input_value()
    assert "leave_one_out: true" in text and "synthetic-addition" in text and "budget: 0.05" in text
    page.locator("#yaml-preview").click()
    page.locator("#preview-summary", has_text="7 runs").wait_for()
