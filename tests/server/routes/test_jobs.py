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
from server.assess.recommending import FitCache, advise
from server.lifecycle.experiments import get_experiment
from server.lifecycle.spec import ExperimentSpec, spec_of
from server.store.db import read_session
from server.store.models import Job, RecommendationSnapshot, StoredAssessment, utcnow
from tests.server.conftest import Service, make_settings, start_service
from tests.server.helpers import curve_points, post_points, sweep_doc
from tests.server.live import served


@pytest.fixture
def quiet(database_url: str, tmp_path: Path) -> Iterator[Service]:
    """A service without background assessments: every assessment here is the job's own."""
    yield from start_service(make_settings(database_url, tmp_path, interval_refit=False))


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


def test_the_post_answers_at_once_with_a_job(quiet: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = _grid(quiet)
    quiet.drain()
    with _held_assessments(monkeypatch) as release:
        t0 = time.perf_counter()
        r = _post(quiet.client, quiet, exp["id"])
        took = time.perf_counter() - t0
        assert r.status_code == 202, r.text
        assert took < 1.0, took  # the assessment is held: the old POST answered only once it was released
        body = r.json()
        assert set(body) == {"job_id", "status", "status_url"} and body["status"] in ("queued", "running")
        assert r.headers["location"] == body["status_url"] == f"/api/v1/jobs/{body['job_id']}"
        again = _post(quiet.client, quiet, exp["id"]).json()
        assert again["job_id"] == body["job_id"], "one job per experiment while it is queued or running"
        now = quiet.client.get(body["status_url"], headers=quiet.read).json()
        assert now["status"] in ("queued", "running") and now["result"] is None and now["finished_at"] is None
        t0 = time.perf_counter()
        waited = quiet.client.get(body["status_url"], params={"wait": 0.3}, headers=quiet.read).json()
        assert 0.25 < time.perf_counter() - t0 < 5 and waited["status"] in ("queued", "running")
        release.set()
        job = _wait(quiet, body["status_url"])
    assert job["status"] == "succeeded", job
    assert job["started_at"] <= job["finished_at"] and job["error"] is None
    assert {r["run_id"] for r in job["result"]["recommendations"]} == {r["id"] for r in exp["runs"]}
    later = _post(quiet.client, quiet, exp["id"]).json()
    assert later["job_id"] != body["job_id"], "a finished job is not answered to a new POST"
    assert _wait(quiet, later["status_url"])["status"] == "succeeded"


def _synchronous(service: Service, experiment_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the synchronous POST (256eb1a) did, with a cold fit cache: its answer and the assessment it stored."""
    ctx = service.ctx
    with read_session(ctx.engine) as reader:
        assessment, decided, _ = build_assessment(reader, spec_of(reader, experiment_id), FitCache(FitPool(0)))
    with ctx.sessions.begin() as session:
        stored = get_experiment(session, experiment_id)
        store_assessment(session, assessment)
        snap = advise(session, ExperimentSpec.of(stored), decided)
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


def _same_as_synchronous(service: Service) -> None:
    """The job's stored assessment and answer equal the synchronous POST's, computed again with a cold fit cache."""
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


def test_the_job_stores_and_answers_what_the_synchronous_post_did(quiet: Service) -> None:
    _same_as_synchronous(quiet)  # the job computes it


def test_a_job_that_reuses_the_background_assessment_stores_the_same(service: Service) -> None:
    _same_as_synchronous(service)  # the background assessed the same inputs first: the job reuses it


def test_the_same_advice_is_stored_once_however_often_it_is_asked_for(quiet: Service) -> None:
    """Two POSTs with no new points answer the same advice from one snapshot (the explicit request used to store a
    snapshot of its own each time), while the background and the POST share one store step."""
    exp = _grid(quiet)
    quiet.drain()
    first = _wait(quiet, _post(quiet.client, quiet, exp["id"]).json()["status_url"])
    second = _wait(quiet, _post(quiet.client, quiet, exp["id"]).json()["status_url"])
    assert first["status"] == second["status"] == "succeeded", (first, second)
    assert second["result"] == first["result"]  # created_at included: the snapshot the first POST stored
    with read_session(quiet.ctx.engine) as session:
        snapshots = session.scalars(
            select(RecommendationSnapshot).where(RecommendationSnapshot.experiment_id == exp["id"])
        ).all()
    assert len(snapshots) == 1, [s.id for s in snapshots]


def test_a_failing_job_reports_failed_with_its_error(quiet: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = _grid(quiet, prompts=(32, 48))
    quiet.drain()

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the fit pool is gone")

    monkeypatch.setattr(assessing, "decide", broken)
    r = _post(quiet.client, quiet, exp["id"])
    assert r.status_code == 202, r.text
    job = _wait(quiet, r.json()["status_url"])
    assert job["status"] == "failed" and job["result"] is None and job["finished_at"] is not None
    assert job["error"] == "RuntimeError: the fit pool is gone"
    monkeypatch.undo()
    retry = _post(quiet.client, quiet, exp["id"]).json()
    assert retry["job_id"] != job["job_id"]
    assert _wait(quiet, retry["status_url"])["status"] == "succeeded"


def test_unknown_jobs_and_experiments_are_404(quiet: Service) -> None:
    r = quiet.client.get("/api/v1/jobs/0123456789abcdef0123456789abcdef", headers=quiet.read)
    assert r.status_code == 404
    detail = r.json()["detail"]
    assert detail.startswith("job '0123456789abcdef0123456789abcdef' does not exist: job ids come from POST"), detail
    assert quiet.client.get("/api/v1/jobs/" + "x" * 65, headers=quiet.read).status_code == 422
    assert quiet.client.get("/api/v1/jobs/abc", params={"wait": 61}, headers=quiet.read).status_code == 422
    r = _post(quiet.client, quiet, 999_999)
    assert r.status_code == 404 and r.json()["detail"] == "experiment 999999 does not exist"


def test_a_job_of_a_stopped_process_is_failed_and_replaced(quiet: Service) -> None:
    """Another process's job is answered while it is alive (its heartbeat is recent); once its heartbeat is older
    than STALE_S it reads as failed, and the next POST starts a new job."""
    exp = _grid(quiet, prompts=(32, 48))
    quiet.drain()
    with quiet.ctx.sessions.begin() as session:
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
    assert _post(quiet.client, quiet, exp["id"]).json()["job_id"] == "a" * 32
    with quiet.ctx.sessions.begin() as session:
        job = session.get(Job, "a" * 32)
        assert job is not None
        job.heartbeat_at = utcnow() - timedelta(seconds=STALE_S + 1)
    stale = quiet.client.get("/api/v1/jobs/" + "a" * 32, headers=quiet.read).json()
    assert stale["status"] == "failed" and "stopped" in stale["error"]
    fresh = _post(quiet.client, quiet, exp["id"]).json()
    assert fresh["job_id"] != "a" * 32
    assert _wait(quiet, fresh["status_url"])["status"] == "succeeded"
    assert quiet.client.get("/api/v1/jobs/" + "a" * 32, headers=quiet.read).json()["status"] == "failed"


def test_eight_posts_leave_the_write_lane_free(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight recommendations POSTs (the write limit) while their assessments are held: a metrics POST still gets
    200 before any is released. The synchronous POST held one of the eight write slots until its assessment was done."""
    with served(database_url, tmp_path, max_inflight_writes=8, interval_refit=False) as (service, url):
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
            # Answered while every assessment is still held: with the eight slots taken until release, this
            # write would wait its write_queue_seconds and be shed (503), or wait for the release.
            r = c.post(
                f"{url}/api/v1/runs/{other}/metrics",
                json={"points": [{"step": 1, "compute": 1.0, "pass_rate": 0.2}]},
                headers=service.write,
            )
            held = not release.is_set()
            release.set()
            for t in threads:
                t.join()
        assert r.status_code == 200 and held, (r.status_code, r.text)
        assert all(a is not None and a.status_code == 202 for a in answers), [a and a.status_code for a in answers]
        assert service.ctx.drain(120)


def test_a_job_takes_its_turn_and_reuses_the_background_assessment(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A POST while the experiment's background assessment computes: the job waits for it instead of fitting and
    deciding the same grid at the same time, then stores its result, which equals computing it again."""
    import server.assess.jobs as jobs

    exp = _grid(service, prompts=(32, 48, 64))
    service.drain()
    real = jobs.build_assessment
    computing, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        computing.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "build_assessment", counted)
    post_points(service, exp["runs"][0]["id"], curve_points(A=0.45, n=40, c_max=9000.0, seed=7)[30:])
    assert computing.wait(30), "the background assessment did not start"
    job = _post(service.client, service, exp["id"]).json()
    time.sleep(0.3)
    assert calls == ["scalerl-interval-refitter"], calls  # the job waits for its turn
    release.set()
    assert _wait(service, job["status_url"])["status"] == "succeeded"
    assert service.ctx.drain(60)
    assert calls == ["scalerl-interval-refitter"], calls  # and reuses what the background computed
    by_job = _stored(service, exp["id"])
    monkeypatch.undo()
    assert by_job == _synchronous(service, exp["id"])[1]


def test_the_last_assessment_is_reused_only_while_its_inputs_are_unchanged(service: Service) -> None:
    from server.assess.jobs import AssessmentTurns

    exp = _grid(service, prompts=(32, 48))
    service.drain()
    turns, cache = AssessmentTurns(), FitCache(FitPool(0))
    with read_session(service.ctx.engine) as reader:
        first = turns.assess(reader, spec_of(reader, exp["id"]), cache)
        assert turns.assess(reader, spec_of(reader, exp["id"]), cache) is first
    service.client.post(
        f"/api/v1/runs/{exp['runs'][0]['id']}/status", json={"status": "stopped", "reason": "r"}, headers=service.write
    )
    with read_session(service.ctx.engine) as reader:
        again = turns.assess(reader, spec_of(reader, exp["id"]), cache)
    assert again is not first and again[0].state != first[0].state


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
