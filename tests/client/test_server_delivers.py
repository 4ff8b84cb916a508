"""Issue 45 items 2 and 4 on a live server with no worker at all (`scalerl server` alone): a trainer killed without a
word goes `lost` once it missed its heartbeats, and the alerts (that one, and a failed run's) reach a webhook,
delivered by the server itself (they stayed "pending" for ever: delivery lived in the cpu worker)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scalerl.client import Client, Point
from server.alerts.settings import alert_settings
from server.context import ServiceContext
from server.migrate import upgrade
from server.settings import Settings
from tests.client.conftest import Service, write_token
from tests.server.live import live_server
from tests.worker.receiver import webhook_receiver


@pytest.fixture
def lone_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    monkeypatch.setenv("SCALERL_WEBHOOK_ALLOW_PRIVATE", "true")  # the receiver listens on 127.0.0.1
    alert_settings.cache_clear()
    url = f"sqlite:///{tmp_path / 'scalerl.db'}"
    upgrade(url)
    settings = Settings(  # type: ignore[call-arg]
        database_url=url, home=tmp_path, reaper_interval_seconds=0.3, silent_after_heartbeats=2.0
    )
    ctx = ServiceContext.build(settings)
    with ctx.sessions.begin() as session:
        from server.tokens import create_token

        admin = create_token(session, "admin", ["admin"]).secret
    with live_server(ctx) as base:
        yield Service(base, admin, ctx)
    ctx.engine.dispose()
    alert_settings.cache_clear()


def _wait(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_silent_run_and_failed_run_alerts_reach_a_webhook_without_a_worker(lone_server: Service) -> None:
    token = write_token(lone_server.ctx)
    with webhook_receiver() as receiver, Client(lone_server.url, lone_server.token) as admin:
        made = admin.request("POST", "/api/v1/alerts/webhooks", json={"name": "ops", "url": receiver.url})
        assert made["enabled"]
        with Client(lone_server.url, token) as api:
            silent = api.register_run("killed-9", experiment="lone", heartbeat_seconds=1)
            api.post_points(silent.id, [Point.make(1, 1.0, 0.1)])
            failing = api.register_run("diverged", experiment="lone")
            api.post_points(failing.id, [Point.make(1, 1.0, 0.1)])
            api.report_status(failing.id, "failed", "loss is nan at step 3")
            # No heartbeat from killed-9 any more: lost after 2 missed seconds, and both alerts delivered.
            assert _wait(lambda: api.run_info(silent.id).status == "lost", 20)

        def kinds() -> set[str]:
            return {json.loads(r.body)["type"] for r in receiver.requests}

        assert _wait(lambda: {"run_lost", "run_failed"} <= kinds(), 20), kinds()
    lost = next(json.loads(r.body) for r in receiver.requests if json.loads(r.body)["type"] == "run_lost")
    assert "went silent" in lost["title"] and lost["run_id"] == silent.id
