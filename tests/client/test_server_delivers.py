"""On a live server with no worker at all (`scalerl server` alone): a trainer killed without a
word goes `lost` once it missed its heartbeats, and the alerts (that one, and a failed run's) reach a webhook,
delivered by the server itself (they stayed "pending" for ever: delivery lived in the cpu worker)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from scalerl.client import Client, Point
from server.alerts.settings import alert_settings
from server.lifecycle.tokens import create_token
from tests.client.conftest import Service, build_context, wait_for, write_token
from tests.server.live import live_server
from tests.worker.receiver import webhook_receiver


@pytest.fixture
def lone_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    monkeypatch.setenv("SCALERL_WEBHOOK_ALLOW_PRIVATE", "true")  # the receiver listens on 127.0.0.1
    alert_settings.cache_clear()
    ctx = build_context(
        tmp_path, reaper_interval_seconds=0.3, silent_after_heartbeats=2.0, interval_refit_min_seconds=30.0
    )
    with ctx.sessions.begin() as session:
        admin = create_token(session, "admin", ["admin"]).secret
    with live_server(ctx) as base:
        yield Service(base, admin, ctx)
    ctx.engine.dispose()
    alert_settings.cache_clear()


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
            assert wait_for(lambda: api.run_info(silent.id).status == "lost", 20)

        def kinds() -> set[str]:
            return {json.loads(r.body)["type"] for r in receiver.requests}

        assert wait_for(lambda: {"run_lost", "run_failed"} <= kinds(), 20), kinds()
    lost = next(json.loads(r.body) for r in receiver.requests if json.loads(r.body)["type"] == "run_lost")
    assert "went silent" in lost["title"] and lost["run_id"] == silent.id
