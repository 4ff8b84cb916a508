"""Run lifecycle: creation, status transitions (with history and events), leases for workers, and expiry.

Invariants: every status change goes through :func:`transition`, which checks the machine in
:mod:`server.lifecycle.status`, records a ``run_transitions`` row and emits a ``status`` event; ``attempts`` counts how
many times the run was started (claimed or started by its first metrics).
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from server.base.rows import as_utc as as_utc  # the lifecycle's importers read it here
from server.lifecycle.status import LEASED, RESUMABLE, TERMINAL, check_transition
from server.store.events import emit
from server.store.models import Experiment, Run, RunTransition, utcnow

SYSTEM = "system"
#: The reason of a silent trainer's move to ``lost`` starts with this (the alert hook and the pages read it).
SILENT = "no report from the trainer for "
#: The reason of its return to ``running``.
REPORTED_AGAIN = "the trainer reported again"
#: The reason of a claim's transition to ``running`` (followed by the worker's name).
CLAIMED_BY = "claimed by worker "


class NotFound(LookupError):
    """A referenced object does not exist."""


class Conflict(ValueError):
    """The request is valid but conflicts with the current state (HTTP 409)."""


def get_run(session: Session, run_id: int, *, lock: bool = False) -> Run:
    stmt = select(Run).where(Run.id == run_id)
    if lock:
        stmt = stmt.with_for_update()
    run = session.scalar(stmt)
    if run is None:
        raise NotFound(f"run {run_id} does not exist")
    return run


def get_run_and_experiment(session: Session, run_id: int) -> tuple[Run, Experiment]:
    """The run, locked for update, and its experiment, in one query (the metrics path)."""
    stmt = (
        select(Run, Experiment)
        .join(Experiment, Run.experiment_id == Experiment.id)
        .where(Run.id == run_id)
        .with_for_update(of=Run)
    )
    row = session.execute(stmt).first()
    if row is None:
        raise NotFound(f"run {run_id} does not exist")
    return row[0], row[1]


def transition(session: Session, run: Run, to: str, reason: str, actor: str) -> None:
    """Move ``run`` to status ``to`` (raises TransitionError if the machine forbids it)."""
    check_transition(run.status, to)
    now = utcnow()
    previous = run.status
    if to == "running":
        run.attempts += 1
        run.started_at = now
        run.finished_at = None
    if to == "queued":
        run.started_at = None
        run.finished_at = None
    if to in TERMINAL:
        run.finished_at = now
    if to not in LEASED:
        run.lease_id = None
        run.lease_owner = None
        run.lease_expires_at = None
    run.status = to
    run.status_reason = reason
    run.updated_at = now
    session.add(
        RunTransition(
            run_id=run.id, from_status=previous, to_status=to, reason=reason, actor=actor, attempt=run.attempts
        )
    )
    emit(
        session,
        run.experiment_id,
        "status",
        {"run_id": run.id, "name": run.name, "from": previous, "to": to, "reason": reason, "attempt": run.attempts},
        run_id=run.id,
    )


def create_run(session: Session, experiment: Experiment, actor: str, **fields: Any) -> Run:
    """Insert a queued run with its first transition row and a ``run_created`` event."""
    run = Run(experiment_id=experiment.id, status="queued", status_reason="created", **fields)
    session.add(run)
    session.flush()
    session.add(RunTransition(run_id=run.id, from_status=None, to_status="queued", reason="created", actor=actor))
    emit(session, experiment.id, "run_created", {"run_id": run.id, "name": run.name}, run_id=run.id)
    return run


def set_budget(session: Session, run: Run, budget: float, reason: str, actor: str) -> None:
    """Set the run's budget (never below the compute it already used) and emit a ``budget`` event."""
    if budget < run.compute_used:
        raise Conflict(f"budget {budget:.6g} is below the compute already used ({run.compute_used:.6g})")
    data = {"run_id": run.id, "from": run.budget, "to": budget, "reason": reason, "actor": actor}
    run.budget = budget
    run.updated_at = utcnow()
    emit(session, run.experiment_id, "budget", data, run_id=run.id)


def _grant_lease(run: Run, worker: str, seconds: float) -> None:
    run.lease_id = secrets.token_hex(16)
    run.lease_owner = worker
    run.lease_expires_at = utcnow() + timedelta(seconds=seconds)


def claim(session: Session, worker: str, seconds: float, experiment_id: int | None) -> Run | None:
    """Atomically take the oldest queued run (optionally of one experiment), start it and lease it to ``worker``.

    Concurrent claimers never get the same run: the conditional UPDATE only succeeds for one of them.
    """
    stmt = select(Run.id).where(Run.status == "queued").order_by(Run.id).limit(8)
    if experiment_id is not None:
        stmt = stmt.where(Run.experiment_id == experiment_id)
    for run_id in session.scalars(stmt).all():
        won = session.execute(update(Run).where(Run.id == run_id, Run.status == "queued").values(updated_at=utcnow()))
        if cast("CursorResult[Any]", won).rowcount != 1:
            continue
        run = get_run(session, run_id)
        session.refresh(run)
        transition(session, run, "running", f"{CLAIMED_BY}{worker}", worker)
        _grant_lease(run, worker, seconds)
        return run
    return None


def check_lease(run: Run, lease_id: str | None) -> None:
    """Fencing: a request that carries a lease id must carry the run's current lease, always (a worker whose lease
    expired, was reaped or was replaced by a retry's claim must not write); a leased run only accepts its holder."""
    if lease_id == run.lease_id:
        return
    if run.lease_id is None:
        raise Conflict(f"run {run.id} has no active lease (status {run.status}); this lease is no longer valid")
    raise Conflict(f"run {run.id} is leased by {run.lease_owner}; pass its lease_id (yours is not current)")


def was_claimed(session: Session, run: Run) -> bool:
    """True when a worker ever claimed the run (it is executed by workers, not by a trainer of its own)."""
    stmt = select(RunTransition.id).where(
        RunTransition.run_id == run.id, RunTransition.reason.startswith(CLAIMED_BY, autoescape=True)
    )
    return session.scalar(stmt.limit(1)) is not None


def check_unleased_start(session: Session, run: Run) -> None:
    """A queued run that workers execute starts ``running`` only through a claim (which grants a lease that the
    reaper watches); only a run that was never claimed (a directly registered trainer) starts with a report."""
    if run.status == "queued" and was_claimed(session, run):
        raise Conflict(f"run {run.id} is queued for a worker; it starts only through POST /api/v1/runs/claim")


def seen(session: Session, run: Run, actor: str, heartbeat_seconds: float | None = None) -> None:
    """The run's trainer was heard from now (a metrics batch or a heartbeat): remember when (and, when it says, how
    often it will be heard from); a run of its own that was ``lost`` for silence is ``running`` again."""
    run.last_seen_at = utcnow()
    if heartbeat_seconds is not None:
        run.heartbeat_seconds = heartbeat_seconds
    if run.status == "lost" and run.lease_id is None and not was_claimed(session, run):
        transition(session, run, "running", REPORTED_AGAIN, actor)


def own_heartbeat(session: Session, run: Run, actor: str, heartbeat_seconds: float | None) -> None:
    """A trainer of its own (no lease) is alive. Refused for a leased run (its worker renews the lease) and for a
    run that has ended (it is reopened by ``resume``/``retry`` or by registering with ``resume='allow'``)."""
    if run.lease_id is not None or was_claimed(session, run):
        raise Conflict(f"run {run.id} is executed by workers; its heartbeat needs the lease_id")
    if run.status not in ("queued", "running", "stopping", "lost"):
        raise Conflict(f"run {run.id} has ended ({run.status}); resume or retry it to report again")
    seen(session, run, actor, heartbeat_seconds)


def reap_silent(session: Session, misses: float, now: datetime | None = None) -> list[int]:
    """Mark runs of their own trainers (never leased) whose trainer promised a heartbeat but has been silent for
    more than ``misses`` × its interval as ``lost``: ``running``/``stopping`` ones, and ``queued`` ones registered
    by a trainer that never reported (killed between its registration and its first point); returns their ids."""
    cutoff = now or utcnow()
    candidates = session.scalars(
        select(Run)
        .where(Run.status.in_((*LEASED, "queued")), Run.lease_id.is_(None), Run.heartbeat_seconds.is_not(None))
        .order_by(Run.id)
    ).all()
    lost: list[int] = []
    for run in candidates:
        assert run.heartbeat_seconds is not None
        last = as_utc(run.last_seen_at or run.started_at or run.updated_at)
        silent = (cutoff - last).total_seconds()
        if silent > misses * run.heartbeat_seconds and not was_claimed(session, run):
            every = f"{run.heartbeat_seconds:g}"
            before = " before its first point" if run.status == "queued" else ""
            reason = f"{SILENT}{silent:.0f} s{before} (it promised a heartbeat every {every} s): crashed or killed?"
            transition(session, run, "lost", reason, SYSTEM)
            lost.append(run.id)
    return lost


def reopen(session: Session, run: Run, actor: str) -> None:
    """Put an ended run back to ``queued`` (stopped/succeeded/failed; a ``lost`` one needs nothing: its next report
    revives it): its trainer's next metrics start it again as a new attempt."""
    if run.status in RESUMABLE:
        transition(session, run, "queued", "resumed by its trainer (resume='allow')", actor)
    elif run.status == "failed":
        transition(session, run, "queued", "retried by its trainer (resume='allow')", actor)


def heartbeat(session: Session, run: Run, lease_id: str, seconds: float) -> None:
    if run.status not in LEASED or run.lease_id is None:
        raise Conflict(f"run {run.id} has no active lease (status {run.status})")
    check_lease(run, lease_id)
    run.lease_expires_at = utcnow() + timedelta(seconds=seconds)
    run.updated_at = utcnow()


def reap_expired(session: Session, now: datetime | None = None) -> list[int]:
    """Mark runs whose lease expired as ``lost``; returns their ids."""
    cutoff = now or utcnow()
    expired = session.scalars(
        select(Run)
        .where(Run.status.in_(LEASED), Run.lease_expires_at.is_not(None), Run.lease_expires_at < cutoff)
        .order_by(Run.id)
    ).all()
    for run in expired:
        transition(session, run, "lost", f"lease of {run.lease_owner} expired without a heartbeat", SYSTEM)
    return [r.id for r in expired]
