"""Which run a registration means (server.lifecycle.identity) and that no run is ever stuck: W&B's resume semantics
with a key, ``auto`` never joining a live trainer, re-sent points starting a reopened run, a registered trainer that
never reported ending ``lost``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from server.lifecycle.runs import reap_silent
from server.store.alert_models import Alert
from server.store.models import Run, utcnow
from tests.server.conftest import Service
from tests.server.helpers import post_points

POINTS = [{"step": s, "compute": float(s), "pass_rate": 0.1 + 0.01 * s} for s in range(1, 6)]


def _register(service: Service, name: str, expect: int, **body: Any) -> dict[str, Any]:
    r = service.client.post("/api/v1/runs", json={"name": name, **body}, headers=service.write)
    assert r.status_code == expect, r.text
    out: dict[str, Any] = r.json()
    return out


def _status(service: Service, run_id: int, status: str, expect: int = 200) -> dict[str, Any]:
    r = service.client.post(
        f"/api/v1/runs/{run_id}/status", json={"status": status, "reason": "test"}, headers=service.write
    )
    assert r.status_code == expect, r.text
    out: dict[str, Any] = r.json()
    return out


def _silence(service: Service, run_id: int, seconds: float) -> None:
    """As if the run's trainer was last heard from ``seconds`` ago."""
    with service.ctx.sessions.begin() as session:
        then = utcnow() - timedelta(seconds=seconds)
        session.execute(update(Run).where(Run.id == run_id).values(last_seen_at=then, updated_at=then))


def test_auto_never_joins_a_live_trainer_and_joins_a_dead_one(service: Service) -> None:
    first = _register(service, "twin", 201, resume="auto", heartbeat_seconds=10)
    post_points(service, first["id"], POINTS)
    second = _register(service, "twin", 201, resume="auto", heartbeat_seconds=10)  # the first still beats
    assert second["name"] == "twin-2" and second["id"] != first["id"]
    post_points(service, second["id"], POINTS)
    _status(service, second["id"], "succeeded")
    assert _status(service, first["id"], "succeeded")["status"] == "succeeded"  # the first was never told to stop

    crashed = _register(service, "crash", 201, resume="auto", heartbeat_seconds=10)
    post_points(service, crashed["id"], POINTS)
    _silence(service, crashed["id"], 25)  # more than two promised heartbeats: nobody is reporting to it
    again = _register(service, "crash", 200, resume="auto", heartbeat_seconds=10)
    assert again["id"] == crashed["id"] and again["status"] == "running"

    no_promise = _register(service, "plain", 201, resume="auto")
    assert _register(service, "plain", 200, resume="auto")["id"] == no_promise["id"]  # cannot tell: as before


def test_a_key_is_the_identity(service: Service) -> None:
    a = _register(service, "same-name", 201, key="k1", resume="auto")
    b = _register(service, "same-name", 201, key="k2", resume="auto")  # another identity: never merged
    assert b["name"] == "same-name-2" and b["key"] == "k2" and a["key"] == "k1"
    assert _register(service, "same-name", 200, key="k1", resume="auto")["id"] == a["id"]  # a retry: the same run
    assert _register(service, "renamed", 200, key="k2", resume="allow")["id"] == b["id"]  # the key, not the name
    r = service.client.post("/api/v1/runs", json={"name": "x", "key": "k1", "resume": "never"}, headers=service.write)
    assert r.status_code == 409 and "key 'k1'" in r.json()["detail"]
    r = service.client.post("/api/v1/runs", json={"name": "same-name", "key": "k3", "resume": "must"},
                            headers=service.write)  # fmt: skip
    assert r.status_code == 404 and "no run with key 'k3'" in r.json()["detail"]
    r = service.client.post("/api/v1/runs", json={"name": "x", "key": "bad key!"}, headers=service.write)
    assert r.status_code == 422 and "key" in r.text
    post_points(service, a["id"], POINTS)
    _status(service, a["id"], "succeeded")
    resumed = _register(service, "same-name", 200, key="k1", resume="auto")  # W&B: an id that exists is resumed
    assert resumed["id"] == a["id"] and resumed["status"] == "queued"


def test_never_and_must_by_name(service: Service) -> None:
    _register(service, "taken", 201)
    r = service.client.post("/api/v1/runs", json={"name": "taken", "resume": "never"}, headers=service.write)
    assert r.status_code == 409 and "already has a run named 'taken'" in r.json()["detail"]
    r = service.client.post("/api/v1/runs", json={"name": "missing", "resume": "must"}, headers=service.write)
    assert r.status_code == 404 and "no run named 'missing'" in r.json()["detail"]


def test_a_finished_run_resumed_and_sent_its_points_again_runs_and_finishes(service: Service) -> None:
    for resume in ("allow", "must"):
        run = _register(service, f"again-{resume}", 201)
        post_points(service, run["id"], POINTS)
        _status(service, run["id"], "succeeded")
        back = _register(service, f"again-{resume}", 200, resume=resume)
        assert back["status"] == "queued"
        post_points(service, run["id"], POINTS)  # from step 1: every point is already stored
        now = service.client.get(f"/api/v1/runs/{run['id']}", headers=service.read).json()
        assert now["status"] == "running" and now["n_points"] == len(POINTS)
        assert _status(service, run["id"], "succeeded")["status"] == "succeeded"


def test_a_trainer_killed_before_its_first_point_leaves_a_lost_run_with_an_alert(service: Service) -> None:
    run = _register(service, "never-reported", 201, heartbeat_seconds=10)
    other = _register(service, "no-promise", 201)  # promised nothing: never taken for crashed
    with service.ctx.sessions.begin() as session:
        assert reap_silent(session, 6.0) == []  # within its promise
        assert reap_silent(session, 6.0, now=utcnow() + timedelta(seconds=61)) == [run["id"]]
    got = service.client.get(f"/api/v1/runs/{run['id']}", headers=service.read).json()
    assert got["status"] == "lost" and "before its first point" in got["status_reason"]
    assert service.client.get(f"/api/v1/runs/{other['id']}", headers=service.read).json()["status"] == "queued"
    with service.ctx.sessions.begin() as session:
        kinds = set(session.scalars(select(Alert.type).where(Alert.run_id == run["id"])))
        assert kinds == {"run_lost"}
        finished = session.scalars(select(Alert.id).where(Alert.type == "experiment_finished")).all()
        assert not finished  # a lost run has not finished its experiment
    assert _status(service, run["id"], "failed")["status"] == "failed"  # and it can be ended by hand


def test_a_run_queued_again_by_hand_waits_for_its_trainer(service: Service) -> None:
    run = _register(service, "requeued", 201, heartbeat_seconds=10)
    post_points(service, run["id"], POINTS)
    _status(service, run["id"], "succeeded")
    r = service.client.post(f"/api/v1/runs/{run['id']}/resume", json={"reason": "more budget"}, headers=service.write)
    assert r.status_code == 200 and r.json()["status"] == "queued"
    with service.ctx.sessions.begin() as session:
        assert reap_silent(session, 6.0, now=utcnow() + timedelta(hours=1)) == []  # no trainer promised anything


def test_the_only_run_lost_is_not_an_experiment_finished(service: Service) -> None:
    run = _register(service, "alone", 201, heartbeat_seconds=10)
    post_points(service, run["id"], POINTS)
    with service.ctx.sessions.begin() as session:
        assert reap_silent(session, 6.0, now=utcnow() + timedelta(seconds=61)) == [run["id"]]
    with service.ctx.sessions.begin() as session:
        assert not session.scalars(select(Alert.id).where(Alert.type == "experiment_finished")).all()
    _status(service, run["id"], "succeeded")  # its trainer's late report: lost -> succeeded
    with service.ctx.sessions.begin() as session:
        assert session.scalars(select(Alert.id).where(Alert.type == "experiment_finished")).all()
