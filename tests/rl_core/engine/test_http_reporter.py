"""The HTTP reporter against the real service (live uvicorn on 127.0.0.1) and against a flaky local server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rl_core.contracts.points import MetricPoint
from rl_core.engine.sinks import HttpReporter
from tests.support.http import Reply, Request, json_reply, local_service

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    from server.lifecycle.tokens import create_token
    from server.runtime.context import ServiceContext
    from server.store.migrate import upgrade
    from server.store.settings import Settings
    from tests.server.live import live_server

    url = f"sqlite:///{tmp_path / 'scalerl.db'}"
    upgrade(url)
    settings = Settings(  # type: ignore[call-arg]
        database_url=url, home=tmp_path, interval_refit_min_seconds=0.0, reaper_interval_seconds=3600.0
    )
    ctx = ServiceContext.build(settings)
    with ctx.sessions.begin() as session:
        secret = create_token(session, "engine-test", ["write"]).secret
    with live_server(ctx) as base:
        yield base, secret
    ctx.engine.dispose()


def test_reporter_posts_points_and_obeys_stop(service: tuple[str, str]) -> None:
    base, token = service
    headers = {"Authorization": f"Bearer {token}"}
    run = httpx.post(f"{base}/api/v1/runs", json={"name": "engine-run"}, headers=headers).json()
    rep = HttpReporter(base, run["id"], token, retries=1, backoff=0.01)
    point = MetricPoint(step=0, compute=0.0, pass_rate=0.2, metrics={"train/loss": 1.0, "bad": float("nan")})
    assert rep.write(point) == "continue"
    assert rep.write(MetricPoint(step=1, compute=0.01, metrics={"train/loss": 0.5})) == "continue"
    assert rep.write(MetricPoint(step=1, compute=0.01, metrics={"train/loss": 0.5})) == "continue"  # idempotent
    stored = httpx.get(f"{base}/api/v1/runs/{run['id']}/metrics", headers=headers).json()
    assert [p["step"] for p in stored] == [0, 1]
    assert stored[0]["pass_rate"] == 0.2 and "bad" not in stored[0]["metrics"]
    assert httpx.post(f"{base}/api/v1/runs/{run['id']}/stop", headers=headers).status_code == 200
    assert rep.write(MetricPoint(step=2, compute=0.02)) == "stop"
    rep.close("stopped", "stop requested by the service")
    assert httpx.get(f"{base}/api/v1/runs/{run['id']}", headers=headers).json()["status"] == "stopped"


def test_retries_with_backoff_and_requeues_failed_points() -> None:
    failures, bodies = [2], list[dict[str, Any]]()

    def flaky(request: Request) -> Reply:
        if failures[0] > 0:
            failures[0] -= 1
            return Reply(503)
        bodies.append(request.json())
        return json_reply(200, {"action": "continue"})

    sleeps: list[float] = []
    with local_service(flaky) as url:
        rep = HttpReporter(url, 7, "t", retries=1, backoff=0.5, sleep=sleeps.append)
        assert rep.write(MetricPoint(step=0, compute=0.0)) == "continue"  # two 503s: gives up, keeps the point
        assert sleeps == [0.5] and bodies == []
        assert rep.write(MetricPoint(step=1, compute=0.1)) == "continue"  # re-sends both
        assert [p["step"] for p in bodies[0]["points"]] == [0, 1]
    dead = HttpReporter("http://127.0.0.1:9", 1, retries=2, backoff=0.1, sleep=sleeps.append)
    assert dead.write(MetricPoint(step=0, compute=0.0)) == "continue"
    assert sleeps[-2:] == [0.1, 0.2] and dead.last_error is not None
