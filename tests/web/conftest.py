"""Browser tests: a real uvicorn server on a temporary SQLite database, driven by headless Chromium (Playwright).

Locally they are skipped, with the reason, when the ``playwright`` package or a Chromium binary is missing; in CI
(``CI`` set) a missing browser is a failure. Chromium is found through ``SCALERL_CHROMIUM`` or ``chromium`` on PATH.
Screenshots go to ``tests/artifacts/`` (and to ``docs/screenshots/`` with ``SCALERL_UPDATE_SCREENSHOTS=1``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.lifecycle.tokens import create_token
from server.runtime.context import ServiceContext
from server.store.migrate import upgrade
from server.store.settings import Settings
from tests.server.live import live_server
from tests.services import unavailable

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
DOCS_SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _unavailable(reason: str) -> None:
    unavailable(f"browser: {reason}")


def chromium_path() -> str | None:
    explicit = os.environ.get("SCALERL_CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class LiveService:
    url: str
    ctx: ServiceContext
    admin_token: str
    write_token: str
    read_token: str

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.admin_token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    home = tmp_path_factory.mktemp("web")
    url = f"sqlite:///{home / 'scalerl.db'}"
    upgrade(url)
    settings = Settings(
        database_url=url,
        home=home,
        interval_refit_min_seconds=5.0,
        reaper_interval_seconds=3600.0,
        sse_poll_seconds=0.5,
    )
    ctx = ServiceContext.build(settings)
    with ctx.sessions.begin() as session:
        secrets = {s: create_token(session, f"browser-test-{s}", [s]).secret for s in ("admin", "write", "read")}  # type: ignore[list-item]
    with live_server(ctx) as base:
        yield LiveService(base, ctx, secrets["admin"], secrets["write"], secrets["read"])
    ctx.engine.dispose()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the 'playwright' Python package is not installed (pip install playwright; no browser download)")
    path = chromium_path()
    if path is None:
        _unavailable("no Chromium found (apt-get install chromium, or set SCALERL_CHROMIUM)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _unexpected(msg: Any) -> bool:
    """Console errors other than the browser's note on an HTTP error answer (tests provoke 4xx on purpose)."""
    return bool(msg.type == "error" and "Failed to load resource" not in msg.text)


@pytest.fixture
def page(browser: Any, live: LiveService) -> Iterator[Any]:
    """A fresh browser context signed in with the write token; fails the test on any uncaught page error."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, device_scale_factor=1)
    context.add_init_script(f"localStorage.setItem('scalerl.token', {live.write_token!r});")
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    pg.on("console", lambda msg: errors.append(f"console: {msg.text}") if _unexpected(msg) else None)
    yield pg
    context.close()
    assert not errors, errors


def screenshot(page: Any, name: str, full_page: bool = True) -> Path:
    """Save a PNG under tests/artifacts/ (and docs/screenshots/ when SCALERL_UPDATE_SCREENSHOTS=1)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    if os.environ.get("SCALERL_UPDATE_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS_SHOTS / path.name)
    return path


def only_this_server(page: Any, live: LiveService) -> list[str]:
    """Abort every request of ``page`` to another origin than ``live``'s; the returned list collects their URLs
    (an air-gapped cluster, or proof that the page never left the server)."""
    elsewhere: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(live.url + "/"):
            r.continue_()
        else:
            elsewhere.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return elsewhere
