"""Fault tests with real processes: the REST server, Celery workers on Redis, PostgreSQL, and the engine.

Each test submits a one-run experiment (a tiny model, ``STEPS`` steps, a checkpoint every 2 steps) and breaks
something while it runs. "Nothing lost or duplicated" is checked on the stored curve: exactly the steps 0..STEPS.
"""

from __future__ import annotations

import hmac
import json
import signal
import time
from typing import Any

import pytest

from tests.support.processes import engine_pids
from tests.worker.cluster import Cluster, RedisServer, grid, wait_for
from tests.worker.conftest import STEPS, logs_of
from tests.worker.receiver import webhook_receiver

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]
EVERY_STEP = list(range(STEPS + 1))


def statuses(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["to_status"], t["actor"]) for t in run["transitions"]]


def test_worker_kill9_then_server_restart_mid_run_lose_nothing(cluster: Cluster) -> None:
    """One run meets both: its worker killed with SIGKILL (its engine exits on the parent-death signal, the lease
    expires, the run is marked lost, re-queued and resumed from its checkpoint by a new worker), then the server
    killed and restarted while the new attempt reports (the worker keeps the points and retries with back-off)."""
    run_id = cluster.submit(grid("kill9-and-restart"))
    before = cluster.wait_steps(run_id, 2, 90)
    assert engine_pids(cluster.home / "runs", run_id), "the engine finished before the kill; raise STEPS"
    cluster.kill("worker-gpu", signal.SIGKILL)  # the worker only: its engine must not outlive it
    wait_for(
        lambda: not engine_pids(cluster.home / "runs", run_id), 30, "the orphaned engine to exit (parent-death signal)"
    )
    lost = cluster.wait_status(run_id, {"lost", "queued"}, 45)
    assert lost["attempts"] == 1, statuses(cluster.run(run_id))
    cluster.start_worker("gpu")
    cluster.wait_steps(run_id, max(cluster.steps(run_id)[-1], before[-1]) + 1, 90)  # the new attempt reports
    cluster.kill("server", signal.SIGKILL)
    time.sleep(2)  # the engine keeps training; its points wait in the worker
    cluster.start_server()
    run = cluster.wait_status(run_id, {"succeeded", "failed"}, 120)
    assert run["status"] == "succeeded", logs_of(cluster)
    assert run["attempts"] == 2
    assert cluster.steps(run_id) == EVERY_STEP
    path = statuses(run)
    assert ("lost", "system") in path and ("queued", "supervisor") in path
    alerts = cluster.api("GET", "/api/v1/alerts", params={"run_id": run_id})
    assert any(a["type"] == "run_lost" for a in alerts)


def test_after_redis_restart_a_run_that_raises_fails_with_its_error_kept_and_alerted(
    cluster: Cluster, redis_server: RedisServer
) -> None:
    redis_server.kill()
    time.sleep(1)
    redis_server.start()  # same port; the workers and the supervisor reconnect on their own
    with webhook_receiver() as receiver:
        hook = cluster.api(
            "POST", "/api/v1/alerts/webhooks", json={"name": "ops", "url": receiver.url, "events": ["run_failed"]}
        )
        diverging = {"optimizer": {"lr": 1e30, "eps": 1e-8, "max_grad_norm": None}}
        run_id = cluster.submit(grid("raises", recipe=diverging))
        run = cluster.wait_status(run_id, {"succeeded", "failed"}, 120)
        assert run["status"] == "failed", logs_of(cluster)
        assert "diverged" in run["status_reason"]
        wait_for(lambda: receiver.requests, 30, "the run_failed webhook")
        alerts = cluster.api("GET", "/api/v1/alerts", params={"run_id": run_id, "type": "run_failed"})
        cluster.api("DELETE", f"/api/v1/alerts/webhooks/{hook['id']}")
    assert len(alerts) == 1 and alerts[0]["deliveries"][0]["status"] == "sent"
    got = receiver.requests[0]
    body = json.loads(got.body)
    assert body["type"] == "run_failed" and body["run_id"] == run_id and "diverged" in body["message"]
    mac = hmac.new(hook["secret"].encode(), got.headers["X-Scalerl-Timestamp"].encode() + b"." + got.body, "sha256")
    assert got.headers["X-Scalerl-Signature"] == "sha256=" + mac.hexdigest()


def test_stop_request_ends_the_engine_within_the_grace_period(cluster: Cluster) -> None:
    run_id = cluster.submit(grid("stop"))
    cluster.wait_status(run_id, {"running"}, 60)
    wait_for(lambda: engine_pids(cluster.home / "runs", run_id), 30, "the engine to start")
    asked = time.monotonic()
    cluster.api("POST", f"/api/v1/runs/{run_id}/stop", json={"reason": "test stop"})
    grace = float(cluster.env["SCALERL_STOP_GRACE_SECONDS"])
    wait_for(lambda: not engine_pids(cluster.home / "runs", run_id), grace + 10, "the engine to exit")
    gone = time.monotonic() - asked
    # the worker learns of the stop from its next heartbeat (1 s), then SIGTERM; SIGKILL at the grace period
    assert gone < grace + 2.5, gone
    run = cluster.wait_status(run_id, {"stopped", "succeeded", "failed"}, 60)
    assert run["status"] == "stopped", logs_of(cluster)
    steps = cluster.steps(run_id)
    assert steps == list(range(len(steps))) and len(steps) <= STEPS


def test_extended_budget_continues_from_the_checkpoint(cluster: Cluster) -> None:
    run_id = cluster.submit(grid("extend", budget=1e-9))  # reached at the first step
    run = cluster.wait_status(run_id, {"succeeded", "failed"}, 120)
    assert run["status"] == "succeeded" and "budget" in run["status_reason"], logs_of(cluster)
    first = cluster.steps(run_id)
    cluster.api("POST", f"/api/v1/runs/{run_id}/budget", json={"budget": 1.0})
    cluster.api("POST", f"/api/v1/runs/{run_id}/resume")
    run = cluster.wait_status(run_id, {"succeeded", "failed"}, 120)
    assert run["status"] == "succeeded", (run["status_reason"], logs_of(cluster))
    assert run["attempts"] == 2
    steps = cluster.steps(run_id)
    assert steps == EVERY_STEP and steps[: len(first)] == first


def test_auto_stop_stop_and_resume_reach_a_live_worker(cluster: Cluster) -> None:
    """The freeze-thaw path of ``auto_stop`` with a real worker and engine: a grid stop (the decision is injected
    through ``advise``, the function the service applies its decisions with; the decisions
    themselves are tested in tests/scaling) moves the running run to ``stopping``, the engine checkpoints and
    exits, and a later ``resume`` of the same policy requeues it; the next attempt continues the curve from the
    checkpoint, nothing lost or duplicated."""
    from rl_core.scaling import Recommendation
    from server.assess.recommending import advise, auto_stop_rule
    from server.lifecycle.spec import ExperimentSpec
    from server.store.db import make_engine, session_factory
    from server.store.models import Experiment, Run

    run_id = cluster.submit({**grid("auto-resume"), "policy": {"mode": "auto_stop"}})
    cluster.wait_steps(run_id, 2, 90)
    engine = make_engine(cluster.env["SCALERL_DATABASE_URL"])
    sessions = session_factory(engine)

    def apply(action: str, reason: str, rule: str) -> None:
        with sessions.begin() as session:
            run = session.get(Run, run_id)
            assert run is not None
            experiment = session.get(Experiment, run.experiment_id)
            assert experiment is not None
            decided = [(run, Recommendation(str(run_id), action, reason, {}, rule))]
            advise(session, ExperimentSpec.of(experiment), decided)

    try:
        assert engine_pids(cluster.home / "runs", run_id), "the engine finished before the stop; raise STEPS"
        apply("stop", "dominated: injected by the test", "dominated")
        wait_for(
            lambda: not engine_pids(cluster.home / "runs", run_id), 30, "the engine to exit after the auto_stop stop"
        )
        stopped = cluster.wait_status(run_id, {"stopped", "succeeded", "failed"}, 60)
        assert stopped["status"] == "stopped", logs_of(cluster)
        first = cluster.steps(run_id)
        assert first == list(range(len(first))) and len(first) <= STEPS
        with sessions() as session:
            run = session.get(Run, run_id)
            assert run is not None and auto_stop_rule(session, run) == "dominated"  # the policy may undo it
        apply("resume", "resume: injected by the test", "resume")
        assert cluster.run(run_id)["status"] in ("queued", "running", "succeeded")
        run = cluster.wait_status(run_id, {"succeeded", "failed"}, 120)
    finally:
        engine.dispose()
    assert run["status"] == "succeeded", (run["status_reason"], logs_of(cluster))
    assert run["attempts"] == 2
    steps = cluster.steps(run_id)
    assert steps == EVERY_STEP and steps[: len(first)] == first
    path = statuses(run)
    assert ("stopping", "auto_stop") in path and ("queued", "auto_stop") in path
