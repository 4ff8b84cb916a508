"""The recommendations POST starts a job and answers at once (202, a status URL); ``GET /api/v1/jobs/{id}`` reports
it. Each test fails on the synchronous POST (256eb1a), which assessed on the request and held a write slot meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

import server.assess.assessing as assessing
from server.assess.assessing import build_assessment, store_assessment
from server.assess.fitpool import FitPool
from server.assess.jobs import STALE_S, recommendations_out
from server.assess.recommending import FitCache, store_recommendations
from server.lifecycle.experiments import get_experiment
from server.lifecycle.spec import ExperimentSpec, spec_of
from server.store.db import read_session
from server.store.models import Job, StoredAssessment, utcnow
from tests.server.conftest import Service
from tests.server.helpers import curve_points, post_points, sweep_doc
from tests.server.live import served


def _grid(service: Service, name: str = "jobs", prompts: tuple[int, ...] = (32, 48, 64)) -> dict[str, Any]:
    r = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name, grid={"batch.prompts": list(prompts)}), headers=service.write
    )
    assert r.status_code == 201, r.text
    exp: dict[str, Any] = r.json()
    for k, run in enumerate(exp["runs"]):
        post_points(service, run["id"], curve_points(A=0.45 + 0.12 * k, n=30, seed=k))
    return exp


def _post(client: Any, service: Service, experiment_id: int, base: str = "") -> Any:
    return client.post(f"{base}/api/v1/experiments/{experiment_id}/recommendations", headers=service.write)


def _wait(service: Service, status_url: str) -> dict[str, Any]:
    r = service.client.get(status_url, params={"wait": 60}, headers=service.read)
    assert r.status_code == 200, r.text
    job: dict[str, Any] = r.json()
    return job


@contextmanager
def _held_assessments(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Every assessment waits (inside its computation, before any decision) until the yielded event is set."""
    release = threading.Event()
    real = assessing.decide

    def held(*args: Any, **kwargs: Any) -> Any:
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(assessing, "decide", held)
    try:
        yield release
    finally:
        release.set()


def test_the_post_answers_at_once_with_a_job(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = _grid(service)
    service.drain()
    with _held_assessments(monkeypatch) as release:
        t0 = time.perf_counter()
        r = _post(service.client, service, exp["id"])
        took = time.perf_counter() - t0
        assert r.status_code == 202, r.text
        assert took < 1.0, took  # the assessment is held: the old POST answered only once it was released
        body = r.json()
        assert set(body) == {"job_id", "status", "status_url"} and body["status"] in ("queued", "running")
        assert r.headers["location"] == body["status_url"] == f"/api/v1/jobs/{body['job_id']}"
        again = _post(service.client, service, exp["id"]).json()
        assert again["job_id"] == body["job_id"], "one job per experiment while it is queued or running"
        now = service.client.get(body["status_url"], headers=service.read).json()
        assert now["status"] in ("queued", "running") and now["result"] is None and now["finished_at"] is None
        t0 = time.perf_counter()
        waited = service.client.get(body["status_url"], params={"wait": 0.3}, headers=service.read).json()
        assert 0.25 < time.perf_counter() - t0 < 5 and waited["status"] in ("queued", "running")
        release.set()
        job = _wait(service, body["status_url"])
    assert job["status"] == "succeeded", job
    assert job["started_at"] <= job["finished_at"] and job["error"] is None
    assert {r["run_id"] for r in job["result"]["recommendations"]} == {r["id"] for r in exp["runs"]}
    later = _post(service.client, service, exp["id"]).json()
    assert later["job_id"] != body["job_id"], "a finished job is not answered to a new POST"
    assert _wait(service, later["status_url"])["status"] == "succeeded"


def _synchronous(service: Service, experiment_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the synchronous POST (256eb1a) did, with a cold fit cache: its answer and the assessment it stored."""
    ctx = service.ctx
    with read_session(ctx.engine) as reader:
        assessment, decided, _ = build_assessment(reader, spec_of(reader, experiment_id), FitCache(FitPool(0)))
    with ctx.sessions.begin() as session:
        stored = get_experiment(session, experiment_id)
        store_assessment(session, assessment)
        snap = store_recommendations(session, ExperimentSpec.of(stored), decided)
        answer = recommendations_out(session, stored, snap).model_dump(mode="json")
    return answer, _stored(service, experiment_id)


def _stored(service: Service, experiment_id: int) -> dict[str, Any]:
    """The stored assessment without what says when it was computed (its version and times)."""
    with read_session(service.ctx.engine) as session:
        row = session.scalar(select(StoredAssessment).where(StoredAssessment.experiment_id == experiment_id))
        assert row is not None
        body = dict(row.body)
    for key in ("version", "computed_at", "data_as_of"):
        body.pop(key)
    body["verdict"] = {k: v for k, v in body["verdict"].items() if k not in ("assessment_version", "computed_at")}
    return body


def test_the_job_stores_and_answers_what_the_synchronous_post_did(service: Service) -> None:
    exp = _grid(service, prompts=(32, 48, 64, 96))
    service.drain()
    job = _wait(service, _post(service.client, service, exp["id"]).json()["status_url"])
    assert job["status"] == "succeeded", job
    by_job = _stored(service, exp["id"])
    answer, by_post = _synchronous(service, exp["id"])
    assert by_job == by_post
    assert {k: v for k, v in job["result"].items() if k != "created_at"} == {
        k: v for k, v in answer.items() if k != "created_at"
    }
    actions = {r["action"] for r in answer["recommendations"]}
    assert len(answer["recommendations"]) == 4 and actions - {"continue"}, actions  # a decision, not only defaults


def test_a_failing_job_reports_failed_with_its_error(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = _grid(service, prompts=(32, 48))
    service.drain()

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the fit pool is gone")

    monkeypatch.setattr(assessing, "decide", broken)
    r = _post(service.client, service, exp["id"])
    assert r.status_code == 202, r.text
    job = _wait(service, r.json()["status_url"])
    assert job["status"] == "failed" and job["result"] is None and job["finished_at"] is not None
    assert job["error"] == "RuntimeError: the fit pool is gone"
    monkeypatch.undo()
    retry = _post(service.client, service, exp["id"]).json()
    assert retry["job_id"] != job["job_id"]
    assert _wait(service, retry["status_url"])["status"] == "succeeded"


def test_unknown_jobs_and_experiments_are_404(service: Service) -> None:
    r = service.client.get("/api/v1/jobs/0123456789abcdef0123456789abcdef", headers=service.read)
    assert r.status_code == 404
    detail = r.json()["detail"]
    assert detail.startswith("job '0123456789abcdef0123456789abcdef' does not exist: job ids come from POST"), detail
    assert service.client.get("/api/v1/jobs/" + "x" * 65, headers=service.read).status_code == 422
    assert service.client.get("/api/v1/jobs/abc", params={"wait": 61}, headers=service.read).status_code == 422
    r = _post(service.client, service, 999_999)
    assert r.status_code == 404 and r.json()["detail"] == "experiment 999999 does not exist"


def test_a_job_of_a_stopped_process_is_failed_and_replaced(service: Service) -> None:
    """Another process's job is answered while it is alive (its heartbeat is recent); once its heartbeat is older
    than STALE_S it reads as failed, and the next POST starts a new job."""
    exp = _grid(service, prompts=(32, 48))
    service.drain()
    with service.ctx.sessions.begin() as session:
        now = utcnow()
        session.add(
            Job(
                id="a" * 32,
                kind="recommendations",
                experiment_id=exp["id"],
                status="running",
                actor="t",
                owner="elsewhere:1:x",
                created_at=now,
                started_at=now,
                heartbeat_at=now,
            )
        )
    assert _post(service.client, service, exp["id"]).json()["job_id"] == "a" * 32
    with service.ctx.sessions.begin() as session:
        job = session.get(Job, "a" * 32)
        assert job is not None
        job.heartbeat_at = utcnow() - timedelta(seconds=STALE_S + 1)
    stale = service.client.get("/api/v1/jobs/" + "a" * 32, headers=service.read).json()
    assert stale["status"] == "failed" and "stopped" in stale["error"]
    fresh = _post(service.client, service, exp["id"]).json()
    assert fresh["job_id"] != "a" * 32
    assert _wait(service, fresh["status_url"])["status"] == "succeeded"
    assert service.client.get("/api/v1/jobs/" + "a" * 32, headers=service.read).json()["status"] == "failed"


def test_eight_posts_leave_the_write_lane_free(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight recommendations POSTs (the write limit) while their assessments are held: a metrics POST still gets
    200 at once. The synchronous POST held one of the eight write slots until its assessment was done."""
    with served(database_url, tmp_path, max_inflight_writes=8) as (service, url):
        exps = [_grid(service, f"g{i}", prompts=(32, 48)) for i in range(8)]
        other = service.client.post("/api/v1/runs", json={"name": "elsewhere"}, headers=service.write).json()["id"]
        service.drain()
        with _held_assessments(monkeypatch) as release, httpx.Client(timeout=60) as c:
            answers: list[httpx.Response | None] = [None] * 8

            def one(i: int) -> None:
                answers[i] = _post(c, service, exps[i]["id"], url)

            threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 5
            while any(a is None for a in answers) and time.monotonic() < deadline:
                time.sleep(0.02)
            t0 = time.perf_counter()
            r = c.post(
                f"{url}/api/v1/runs/{other}/metrics",
                json={"points": [{"step": 1, "compute": 1.0, "pass_rate": 0.2}]},
                headers=service.write,
            )
            took = time.perf_counter() - t0
            release.set()
            for t in threads:
                t.join()
        assert r.status_code == 200 and took < 0.25, (r.status_code, took)
        assert all(a is not None and a.status_code == 202 for a in answers), [a and a.status_code for a in answers]
        assert service.ctx.drain(120)


def test_a_background_assessment_waits_for_the_experiments_job(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While an experiment's job is queued or running, its background assessment is put off, and queued again once
    the job is done: the two never fit and decide the same grid at once."""
    runner = service.ctx.jobs
    calls: list[int] = []
    requeued: list[int] = []
    monkeypatch.setattr(runner, "after", requeued.append)
    background = runner.background(calls.append)
    exp = _grid(service, prompts=(32, 48))
    service.drain()
    with _held_assessments(monkeypatch) as release:
        job = _post(service.client, service, exp["id"]).json()
        background(exp["id"])
        assert calls == [] and requeued == []
        release.set()
        assert _wait(service, job["status_url"])["status"] == "succeeded"
    assert service.ctx.drain(60)
    assert requeued == [exp["id"]]
    background(exp["id"])
    assert calls == [exp["id"]]


def test_the_client_waits_for_the_job(database_url: str, tmp_path: Path) -> None:
    from scalerl.client.api import Client

    with served(database_url, tmp_path) as (service, url):
        exp = _grid(service, prompts=(32, 48))
        token = service.write["Authorization"].removeprefix("Bearer ")
        with Client(url, token, from_environment=False) as client:
            job = client.refresh_recommendations(exp["id"], wait=60)
            assert job["status"] == "succeeded", job
            assert {r["run_id"] for r in job["result"]["recommendations"]} == {r["id"] for r in exp["runs"]}
            assert client.job(job["job_id"]) == job
