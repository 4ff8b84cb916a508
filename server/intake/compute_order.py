"""Compute is cumulative: a run's stored compute never decreases as its step grows.

A point that breaks this (a trainer whose compute counter restarted at zero after a resume, a client that sends
the wrong column) would be stored and fitted in compute order, folding the curve back on itself, so the forecast
would be wrong with nothing to say why. :func:`order_violations` finds such points in a batch so that ingestion
refuses them with a reason, like any other bad point.

Invariant: checked against the stored points around the batch's steps and the batch's own points (equal compute
is allowed); the usual batch, which appends after the last stored step, needs no query (the run's ``compute_used``
is the compute at its last step while the invariant holds).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.intake.schemas import MetricPoint
from server.store.models import Run, StoredPoint


def _stored_around(session: Session, run_id: int, first: int, last: int) -> list[tuple[int, float]]:
    """(step, compute) of the run's stored points from the last one before ``first`` to the first one after
    ``last``, in step order."""
    t = StoredPoint.__table__
    below = select(func.max(t.c.step)).where(t.c.run_id == run_id, t.c.step < first).scalar_subquery()
    above = select(func.min(t.c.step)).where(t.c.run_id == run_id, t.c.step > last).scalar_subquery()
    stmt = (
        select(t.c.step, t.c.compute)
        .where(t.c.run_id == run_id, t.c.step >= func.coalesce(below, first), t.c.step <= func.coalesce(above, last))
        .order_by(t.c.step)
    )
    return [(int(r.step), float(r.compute)) for r in session.execute(stmt)]


def _message(point: MetricPoint, other_step: int, other_compute: float, below: bool) -> str:
    relation = "below" if below else "above"
    where = "an earlier" if below else "a later"
    return (
        f"compute {point.compute:g} at step {point.step} is {relation} {other_compute:g} at {where} step {other_step}: "
        "compute is cumulative and must not decrease as the step grows (after a resume, continue from the "
        "compute of the checkpoint's step)"
    )


def order_violations(session: Session, run: Run, points: Sequence[MetricPoint], appending: bool) -> dict[int, str]:
    """Step -> reason for each of ``points`` (new, not stored, distinct steps) whose compute is below that of a
    point at a smaller step (stored, or accepted earlier in this batch) or above that of a stored point at a larger
    step. ``appending``: every point lies after the run's last stored step."""
    if not points:
        return {}
    batch = sorted(points, key=lambda p: p.step)
    if appending:
        stored = [] if run.last_step is None else [(int(run.last_step), float(run.compute_used))]
    else:
        stored = _stored_around(session, run.id, batch[0].step, batch[-1].step)
    bad: dict[int, str] = {}
    events = sorted([(s, c, None) for s, c in stored] + [(p.step, p.compute, p) for p in batch], key=lambda e: e[0])
    # Never above a stored point at a larger step (first, so that a point refused here bounds nothing below).
    floor: tuple[int, float] | None = None
    for step, compute, point in reversed(events):
        if point is None:
            floor = (step, compute) if floor is None or compute <= floor[1] else floor
        elif floor is not None and compute > floor[1]:
            bad[step] = _message(point, floor[0], floor[1], below=False)
    # Never below the largest compute at a smaller step (stored, or accepted earlier in this batch).
    top: tuple[int, float] | None = None
    for step, compute, point in events:
        if step in bad:
            continue
        if point is not None and top is not None and compute < top[1]:
            bad[step] = _message(point, top[0], top[1], below=True)
        elif top is None or compute >= top[1]:
            top = (step, compute)
    return bad
