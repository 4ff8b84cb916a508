"""The supervisor's tick on a real (SQLite) database with counting publishers: automatic retries of lost runs up to
``max_attempts`` (never for a run that was being stopped), one message per queued episode with redispatch, and a
delivery task when alerts are due."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.lifecycle.runs import transition
from server.store.models import Run
from tests.server.conftest import Service, make_settings, start_service
from worker.supervisor import Supervisor

GRID = {"name": "sup", "task": "synthetic-addition", "model": "tiny", "budget": 1.0, "seeds": [0, 1, 2]}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    from server.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'sup.db'}"
    upgrade(url)
    yield from start_service(make_settings(url, tmp_path, interval_refit=False))


def move(svc: Service, run_id: int, *path: str) -> None:
    for to in path:
        with svc.ctx.sessions.begin() as session:
            run = session.get(Run, run_id)
            assert run is not None
            transition(session, run, to, f"test: {to}", "test")


def status(svc: Service, run_id: int) -> tuple[str, int]:
    with svc.ctx.sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run.status, run.attempts


def test_tick_retries_dispatches_and_schedules_deliveries(service: Service) -> None:
    assert service.client.post("/api/v1/experiments", json=GRID, headers=service.write).status_code == 201
    a, b, c = (r["id"] for r in service.client.get("/api/v1/runs", headers=service.read).json())
    sent = {"runs": 0, "deliveries": 0}
    sup = Supervisor(
        service.ctx.sessions,
        lambda: sent.__setitem__("runs", sent["runs"] + 1),
        lambda: sent.__setitem__("deliveries", sent["deliveries"] + 1),
        max_attempts=2,
        redispatch_seconds=3600,
    )
    first = sup.tick()
    assert sorted(first.dispatched) == [a, b, c] and sent["runs"] == 3
    assert sup.tick().dispatched == []  # one message per queued episode
    move(service, a, "running", "lost")  # attempt 1 lost: retried
    move(service, b, "running", "stopping", "lost")  # lost while being stopped: not restarted
    move(service, c, "running", "lost", "queued", "running", "lost")  # attempt 2 of 2 lost: given up
    tick = sup.tick()
    assert tick.retried == [a] and tick.dispatched == [a] and not tick.deliveries
    assert status(service, a) == ("queued", 1)
    assert status(service, b) == ("lost", 1) and status(service, c) == ("lost", 2)
    hook = {"name": "h", "url": "http://127.0.0.1:9/x"}
    assert service.client.post("/api/v1/alerts/webhooks", json=hook, headers=service.admin).status_code == 201
    move(service, a, "running", "failed")  # an alert with a due delivery
    tick = sup.tick()
    assert tick.retried == [] and tick.dispatched == [] and tick.deliveries
    move(service, a, "queued")
    assert sup.tick().dispatched == [a]
    assert sup.tick().dispatched == []
    sup.redispatch_seconds = 0.0
    assert sup.tick().dispatched == [a]  # still queued after the redispatch delay: another message
    assert sent == {"runs": 6, "deliveries": 1}


def test_a_release_on_shutdown_does_not_use_up_the_automatic_retries(service: Service) -> None:
    grid = {**GRID, "name": "released", "seeds": [0]}
    assert service.client.post("/api/v1/experiments", json=grid, headers=service.write).status_code == 201
    (run_id,) = (r["id"] for r in service.client.get("/api/v1/runs", headers=service.read).json())
    sup = Supervisor(service.ctx.sessions, lambda: None, lambda: None, max_attempts=2, redispatch_seconds=3600)
    for n in range(1, 4):  # three deploys in a row: each start handed back, each one retried
        claim = service.client.post(
            "/api/v1/runs/claim", json={"worker": "w", "lease_seconds": 60}, headers=service.write
        ).json()
        assert claim["run"]["id"] == run_id
        body = {"status": "lost", "reason": "worker w shut down", "lease_id": claim["lease_id"], "release": True}
        answer = service.client.post(f"/api/v1/runs/{run_id}/status", json=body, headers=service.write).json()
        assert (answer["status"], answer["attempts"], answer["releases"]) == ("lost", n, n)
        assert sup.tick().retried == [run_id]
    run = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()
    assert "(0 of 2 starts failed)" in run["status_reason"], run["status_reason"]
    move(service, run_id, "running", "lost")  # a lease that expired is a failure: 1 of 2
    assert sup.tick().retried == [run_id]
    move(service, run_id, "running", "lost")  # 2 of 2: given up
    assert sup.tick().retried == [] and status(service, run_id) == ("lost", 5)


@pytest.mark.parametrize(
    "body",
    [
        {"status": "failed", "reason": "x", "lease_id": "abc", "release": True},
        {"status": "lost", "reason": "x", "release": True},
    ],
)
def test_release_is_only_a_leased_loss(service: Service, body: dict[str, object]) -> None:
    assert service.client.post("/api/v1/experiments", json=GRID, headers=service.write).status_code == 201
    run_id = service.client.get("/api/v1/runs", headers=service.read).json()[0]["id"]
    answer = service.client.post(f"/api/v1/runs/{run_id}/status", json=body, headers=service.write)
    assert answer.status_code == 422 and "release: true is only for status 'lost'" in answer.text, answer.text
