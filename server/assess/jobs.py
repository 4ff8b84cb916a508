"""Jobs: an experiment's recommendations assessed off the request. ``POST /api/v1/experiments/{id}/recommendations``
answers ``202`` at once with a job; ``GET /api/v1/jobs/{id}`` reports it (``?wait=`` blocks up to a bound).

Jobs live in the database (table ``jobs``), not in memory: the deployed stack may run several API processes behind
one database and a load balancer, so the GET of a status URL may reach another process than the POST that made it,
and "one job per experiment" must hold across them (the partial unique index ``uq_jobs_active``). The process that
created a job runs it, in one thread of its own (an :class:`~server.assess.background.IntervalRefitter` keyed by
experiment): an assessment of tens of seconds holds no request, no worker thread and no write slot.

Invariants:

- at most one ``recommendations`` job per experiment is ``queued`` or ``running``; a POST meanwhile gets that job;
- a job's result is what the synchronous POST answered (:func:`assess_now`: fits and decisions with no transaction
  open, then one short write transaction that stores the assessment and the recommendations and applies
  ``auto_stop``);
- its owner renews ``heartbeat_at`` every :data:`HEARTBEAT_S` while it is queued or running: one whose heartbeat is
  older than :data:`STALE_S` is reported ``failed`` (its process stopped) and the next POST replaces it;
- in this process an experiment's job and its background assessment never compute at once, and the later one
  reuses the earlier one's result while nothing it reads has changed (:class:`AssessmentTurns`). Overlapping, they
  fitted and decided the same grid twice: with the background assessing after every point fit, the synchronous POST
  on the 60-run grid took 4.4 s against 2.2 s at 01bc380 (whose POST held SQLite's write lock, so no point fit was
  stored and no background assessment started meanwhile); the job, 2.4 s (bench/recommendations_job.py
  --refit-every 0);
- jobs finished more than :data:`KEEP` ago are deleted when a job is created.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from server.assess.advice import finished_runs, for_unfinished
from server.assess.assessing import build_assessment, current_state, store
from server.assess.background import Assess, Assessed, IntervalRefitter
from server.assess.fit_schemas import RecommendationOut, RecommendationsOut
from server.assess.fitcache import FitCache
from server.assess.runread import experiment_runs
from server.base.lru import Bounded
from server.base.safeinput import clip
from server.lifecycle.experiments import get_experiment
from server.lifecycle.runs import NotFound, as_utc
from server.lifecycle.spec import ExperimentSpec, spec_of
from server.store.db import read_session, with_retries
from server.store.models import Experiment, Job, RecommendationSnapshot, utcnow

log = logging.getLogger("scalerl.server")

RECOMMENDATIONS = "recommendations"
JobStatus = Literal["queued", "running", "succeeded", "failed"]
ACTIVE = ("queued", "running")
#: How often the owner renews the heartbeat of its queued and running jobs.
HEARTBEAT_S = 5.0
#: A queued or running job not heard of for this long is taken for failed: its process stopped. Well above the
#: heartbeat and the SQLite busy timeout (30 s), which a renewal may wait for under load.
STALE_S = 120.0
#: Finished jobs are kept this long (their result holds every run's advice: ~0.5 KB a run).
KEEP_HOURS = 24.0
KEEP = timedelta(hours=KEEP_HOURS)
#: The longest ``GET /api/v1/jobs/{id}?wait=`` blocks.
MAX_WAIT_S = 60.0


class JobAccepted(BaseModel):
    """The answer to a POST that started (or found) a job."""

    job_id: str
    status: JobStatus
    status_url: str = Field(description="`GET` it for the job's status and, once it succeeded, its result.")


class JobOut(BaseModel):
    job_id: str
    kind: str
    experiment_id: int
    status: JobStatus
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: RecommendationsOut | None = Field(
        description="Once succeeded: the recommendations stored (what the synchronous POST answered)."
    )
    error: str | None = Field(description="Once failed: why.")
    status_url: str


def status_url(job_id: str) -> str:
    return f"/api/v1/jobs/{job_id}"


def recommendations_out(session: Session, exp: Experiment, snap: RecommendationSnapshot | None) -> RecommendationsOut:
    """The snapshot's advice for the runs that may still use it: a run that has finished since (succeeded, failed,
    stopped) is left out, whatever the decision said when it was still running."""
    body = [] if snap is None else for_unfinished(snap.body, finished_runs(session, exp.id))
    return RecommendationsOut(
        experiment_id=exp.id,
        policy=exp.policy_mode,
        created_at=None if snap is None else as_utc(snap.created_at),
        recommendations=[RecommendationOut.model_validate(r) for r in body],
    )


def assess_now(
    engine: Engine,
    sessions: sessionmaker[Session],
    cache: FitCache,
    experiment_id: int,
    assess: Assess = build_assessment,
) -> RecommendationsOut:
    """Assess the experiment (fits, decisions, verdict), store the assessment and the recommendations (applying
    ``auto_stop``) and return them. The fits and decisions are computed with no transaction open (reads in
    autocommit); only storing them takes the write lock, briefly."""
    with read_session(engine) as reader:
        assessment, decided, _fits = assess(reader, spec_of(reader, experiment_id), cache)

    def stored() -> RecommendationsOut:
        with sessions.begin() as session:
            experiment = get_experiment(session, experiment_id)
            kept = store(session, ExperimentSpec.of(experiment), assessment, decided, requested=True)
            return recommendations_out(session, experiment, kept.recommendations)

    return with_retries(stored)


def _stale(job: Job, now: datetime) -> bool:
    return job.status in ACTIVE and now - as_utc(job.heartbeat_at) > timedelta(seconds=STALE_S)


def job_out(job: Job, now: datetime | None = None) -> JobOut:
    """The job as ``GET /api/v1/jobs/{id}`` answers it (an active job whose owner went silent: ``failed``)."""
    stale = _stale(job, now or utcnow())
    return JobOut(
        job_id=job.id,
        kind=job.kind,
        experiment_id=job.experiment_id,
        status="failed" if stale else job.status,  # type: ignore[arg-type]
        created_at=as_utc(job.created_at),
        started_at=as_utc(job.started_at),
        finished_at=as_utc(job.finished_at),
        result=None if job.result is None else RecommendationsOut.model_validate(job.result),
        error=f"the server process running it stopped (no heartbeat for {STALE_S:g} s)" if stale else job.error,
        status_url=status_url(job.id),
    )


def read_job(engine: Engine, job_id: str) -> JobOut:
    """The job, or :class:`NotFound` (404)."""
    with read_session(engine) as session:
        job = session.get(Job, job_id) if len(job_id) <= 32 else None
        if job is None:
            raise NotFound(
                f"job {clip(job_id, 64)!r} does not exist: job ids come from POST "
                f"/api/v1/experiments/{{id}}/recommendations, and finished jobs are kept {KEEP_HOURS:g} h"
            )
        return job_out(job)


def start_job(sessions: sessionmaker[Session], experiment_id: int, actor: str, owner: str) -> tuple[Job, bool]:
    """The experiment's active recommendations job, or a new queued one owned by ``owner``: (job, created). A stale
    active job (its process stopped) is marked failed and replaced. :class:`NotFound` for an unknown experiment."""

    def attempt() -> tuple[Job, bool]:
        now = utcnow()
        with sessions.begin() as session:
            get_experiment(session, experiment_id)
            active = session.scalar(
                select(Job).where(
                    Job.experiment_id == experiment_id, Job.kind == RECOMMENDATIONS, Job.status.in_(ACTIVE)
                )
            )
            if active is not None and not _stale(active, now):
                return active, False
            if active is not None:
                active.status, active.finished_at = "failed", now
                active.error = f"the server process running it stopped (no heartbeat for {STALE_S:g} s)"
                session.flush()
            session.execute(delete(Job).where(Job.finished_at < now - KEEP))
            job = Job(
                id=uuid.uuid4().hex,
                kind=RECOMMENDATIONS,
                experiment_id=experiment_id,
                status="queued",
                actor=actor,
                owner=owner,
                created_at=now,
                heartbeat_at=now,
            )
            session.add(job)
        return job, True

    for _ in range(3):
        try:
            return with_retries(attempt)
        except IntegrityError:  # another process created the experiment's job at the same moment: answer that one
            continue
    return with_retries(attempt)


def inputs_key(session: Session, spec: ExperimentSpec) -> tuple[object, ...] | None:
    """What an assessment of the experiment reads, as a comparable key: :func:`current_state` (every run's fit and
    decision inputs, status, budget, the fit options and the policy) and what the ETAs, names and units read. ``None``
    (never reused) with ``fit.adaptive_band``: its band reads the fit snapshots that assessments themselves store."""
    if spec.fit.adaptive_band:
        return None
    runs = experiment_runs(session, spec.experiment)
    rows = tuple(
        (r.id, r.name, r.compute_unit, r.compute_used, as_utc(r.started_at), as_utc(r.updated_at)) for r in runs
    )
    return current_state(spec, runs), rows


class AssessmentTurns:
    """Assessments in this process take turns per experiment (its job and its background assessment never compute
    at once), and the experiment's last one is reused while :func:`inputs_key` is unchanged: it equals what
    computing it again gives (the same inputs, the same fits from the cache, the same decisions)."""

    def __init__(self, size: int = 64) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[int, tuple[threading.Lock, int]] = {}
        self._last: Bounded[int, tuple[tuple[object, ...], Assessed]] = Bounded(size)

    @contextmanager
    def turn(self, experiment_id: int) -> Iterator[None]:
        with self._mutex:
            lock, users = self._locks.get(experiment_id, (threading.Lock(), 0))
            self._locks[experiment_id] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._mutex:
                lock, users = self._locks[experiment_id]
                if users == 1:
                    del self._locks[experiment_id]
                else:
                    self._locks[experiment_id] = (lock, users - 1)

    def assess(self, session: Session, spec: ExperimentSpec, cache: FitCache) -> Assessed:
        """:func:`build_assessment` in the experiment's turn, or its last result if nothing it reads changed since."""
        with self.turn(spec.id):
            key = inputs_key(session, spec)
            last = self._last.get(spec.id)
            if key is not None and last is not None and last[0] == key:
                return last[1]
            out = build_assessment(session, spec, cache)
            if key is not None and inputs_key(session, spec) == key:  # nothing changed while it was computed
                self._last.put(spec.id, (key, out))
            return out


class JobRunner:
    """Runs this process's jobs, one at a time, in one thread; renews their heartbeat in another. ``turns``: the
    assessments of this process (the background ones use it too: :class:`~server.assess.background.ExperimentRefit`'s
    ``assess``)."""

    def __init__(
        self,
        engine: Engine,
        sessions: sessionmaker[Session],
        cache: FitCache,
        notify: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.sessions = sessions
        self.cache = cache
        self.owner = f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.turns = AssessmentTurns()
        self.queue = IntervalRefitter(self._run, 0.0, notify, name="recommendations job of experiment")
        self._lock = threading.Lock()
        self._active: dict[int, str] = {}  # experiment id -> its job's id, while queued or running here
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def start(self) -> None:
        self.queue.start()
        if self._beat is None or not self._beat.is_alive():
            self._stop.clear()
            self._beat = threading.Thread(target=self._heartbeats, name="scalerl-job-heartbeat", daemon=True)
            self._beat.start()

    def stop(self) -> None:
        self.queue.stop()
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=10)

    def drain(self, timeout: float = 60.0) -> bool:
        return self.queue.drain(timeout)

    def submit(self, experiment_id: int, actor: str) -> tuple[Job, bool]:
        """Start the experiment's recommendations job (or find the active one): (job, created)."""
        job, created = start_job(self.sessions, experiment_id, actor, self.owner)
        if created:
            with self._lock:
                self._active[experiment_id] = job.id
            self.queue.submit(experiment_id)
        return job, created

    def _run(self, experiment_id: int) -> None:
        job_id = self._claim(experiment_id)
        try:
            if job_id is not None:
                self._execute(job_id, experiment_id)
        finally:
            with self._lock:
                if self._active.get(experiment_id) == job_id:
                    del self._active[experiment_id]

    def _claim(self, experiment_id: int) -> str | None:
        def claim() -> str | None:
            with self.sessions.begin() as session:
                job = session.scalar(
                    select(Job).where(
                        Job.experiment_id == experiment_id,
                        Job.kind == RECOMMENDATIONS,
                        Job.status == "queued",
                        Job.owner == self.owner,
                    )
                )
                if job is None:
                    return None
                job.status, job.started_at, job.heartbeat_at = "running", utcnow(), utcnow()
                return job.id

        return with_retries(claim)

    def _execute(self, job_id: str, experiment_id: int) -> None:
        try:
            out = assess_now(self.engine, self.sessions, self.cache, experiment_id, self.turns.assess)
        except Exception as exc:
            log.exception("recommendations job %s of experiment %s failed", job_id, experiment_id)
            error = str(exc) if isinstance(exc, NotFound) else f"{type(exc).__name__}: {exc}"
            self._finish(job_id, "failed", error=clip(error, 2000))
            return
        self._finish(job_id, "succeeded", result=out.model_dump(mode="json"))

    def _finish(
        self, job_id: str, status: JobStatus, result: dict[str, object] | None = None, error: str | None = None
    ) -> None:
        def finish() -> None:
            with self.sessions.begin() as session:
                session.execute(
                    update(Job)
                    .where(Job.id == job_id, Job.status == "running")  # not one another process took for stale
                    .values(status=status, finished_at=utcnow(), result=result, error=error)
                )

        with_retries(finish)

    def _heartbeats(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock:
                ids = list(self._active.values())
            if not ids:
                continue
            try:
                with self.sessions.begin() as session:
                    session.execute(
                        update(Job).where(Job.id.in_(ids), Job.status.in_(ACTIVE)).values(heartbeat_at=utcnow())
                    )
            except Exception:  # the next renewal retries; a job is taken for stale only after STALE_S
                log.exception("renewing the heartbeat of jobs %s failed", ids)
