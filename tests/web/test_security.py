"""In the browser: a ``#token=`` link never silently replaces a stored token; ``/docs`` works with no
network but the server (its assets are served locally, under a CSP that allows only the server itself)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.conftest import LiveService, only_this_server

KEY = "scalerl.token"


@pytest.fixture
def fresh(browser: Any) -> Iterator[Any]:
    """A browser context with nothing stored (the ``page`` fixture signs in on every navigation)."""
    context = browser.new_context()
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, errors


def stored(page: Any) -> str | None:
    return page.evaluate(f"() => localStorage.getItem({KEY!r})")  # type: ignore[no-any-return]


def test_a_token_link_asks_before_replacing_a_different_stored_token(fresh: Any, live: LiveService) -> None:
    page = fresh
    page.goto(f"{live.url}/#token={live.read_token}")  # nothing stored: the link signs in
    page.wait_for_load_state()
    assert stored(page) == live.read_token and "#token" not in page.url
    dialog = page.locator("dialog#confirm")
    assert not dialog.is_visible()

    page.goto(f"{live.url}/settings#token={live.admin_token}")  # a different token: asked, not replaced
    dialog.wait_for(state="visible")
    assert "#token" not in page.url and stored(page) == live.read_token
    assert live.admin_token not in dialog.inner_text()  # only the last characters are shown
    dialog.get_by_role("button", name="Keep the current token").click()
    page.locator("#banner").get_by_text("Kept the stored API token").wait_for()
    assert stored(page) == live.read_token

    page.goto(f"{live.url}/alerts#token={live.read_token}")  # the same token: nothing to ask
    page.wait_for_load_state()
    assert not dialog.is_visible() and stored(page) == live.read_token

    page.goto(f"{live.url}/settings#token={live.admin_token}")
    dialog.wait_for(state="visible")
    with page.expect_navigation():
        dialog.get_by_role("button", name="Use the token from the link").click()
    assert stored(page) == live.admin_token and "#token" not in page.url


@pytest.mark.parametrize(("path", "rendered"), [("/docs", ".opblock"), ("/redoc", "[data-section-id]")])
def test_api_docs_render_with_no_network_but_the_server(
    fresh: Any, live: LiveService, path: str, rendered: str
) -> None:
    """/docs and /redoc used to load Swagger UI / ReDoc from a public CDN, with no CSP: blank on an air-gapped
    cluster. Every request to another origin is aborted here; the page must still render, with no CSP error."""
    page = fresh
    elsewhere = only_this_server(page, live)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    resp = page.goto(live.url + path)
    assert resp is not None and resp.ok
    csp = resp.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "default-src 'self'" in csp and "http" not in csp
    page.locator(rendered).first.wait_for(timeout=30_000)
    assert page.locator(rendered).count() > 10
    assert "/api/v1/experiments" in page.inner_text("body")
    assert elsewhere == [], elsewhere
    # ReDoc's sidebar always tries its "powered by" logo from cdn.redoc.ly: the CSP blocks it (the image hides).
    blocked = [c for c in console if "Content Security Policy" in c and "cdn.redoc.ly/redoc/logo-mini.svg" not in c]
    assert blocked == [], console
