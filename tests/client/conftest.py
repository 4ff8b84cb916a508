"""A live service for the client tests: the same setup as tests/rl_core/engine/test_http_reporter.py (SQLite, uvicorn on
127.0.0.1 through tests/server/live.py), plus one that can be started late on a port chosen in advance (the
"service is down, then comes back" case)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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


@dataclass
class Service:
    url: str
    token: str
    ctx: ServiceContext

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)


def build_context(home: Path, **overrides: Any) -> ServiceContext:
    """A migrated SQLite service under ``home``: refits at once, no reaper sweep unless ``overrides`` ask for one."""
    url = f"sqlite:///{home / 'scalerl.db'}"
    upgrade(url)
    options: dict[str, Any] = {"interval_refit_min_seconds": 0.0, "reaper_interval_seconds": 3600.0, **overrides}
    settings = Settings(database_url=url, home=home, **options)  # type: ignore[call-arg]
    return ServiceContext.build(settings)


def wait_for(predicate: Callable[[], object], timeout: float = 15.0) -> bool:
    """True once ``predicate()`` is true (polled every 20 ms), False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def write_token(ctx: ServiceContext, name: str = "client-test") -> str:
    with ctx.sessions.begin() as session:
        return create_token(session, name, ["write"]).secret


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    ctx = build_context(tmp_path)
    token = write_token(ctx)
    with live_server(ctx) as url:
        yield Service(url, token, ctx)
    ctx.engine.dispose()
