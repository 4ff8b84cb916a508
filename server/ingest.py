"""Batched, idempotent ingestion of metric points, followed by the fast refit of the run.

Invariants: a stored point is never changed (resending it is a no-op; resending its step with other values is
rejected); a run's compute never decreases as its step grows (:mod:`server.compute_order`); every point is validated
on its own, so bad points never cost the good ones sent with them; the run's counters are refreshed in the same
transaction as the points. The fast point fit runs off the request path, coalesced per run
(:class:`server.background.PointRefit`: :func:`load_fit_curve`, the fit with no transaction open, then
:func:`store_point_fit` in a short transaction of its own), so the single SQLite writer is never held while a curve
is fitted; its cost is bounded by thinning long curves to :data:`MAX_POINT_FIT_POINTS` read by rank.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Table, select, text, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit
from server.compute_order import order_violations
from server.events import emit
from server.forecasting import Curve, emit_fit, load_curve, store_fit
from server.models import Experiment, FitSnapshot, Run, StoredPoint
from server.runs import seen as heard_from
from server.runs import transition
from server.safeinput import clip
from server.schemas import MetricPoint as PointIn
from server.schemas import RejectedPoint

_POINTS = TypeAdapter(list[PointIn])
_POINT = TypeAdapter(PointIn)


@dataclass
class IngestOutcome:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[RejectedPoint] = field(default_factory=list)
    fit: FitSnapshot | None = None
    #: Some accepted point has a pass rate: the run's point fit is due (after the commit).
    refit: bool = False


def _describe(err: Any) -> str:
    """'key: message' of one validation error; a key quoted from the input (a metric name) is clipped."""
    where = ".".join(str(p) if isinstance(p, int) else clip(p, 60) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def validate_points(raw: Sequence[Any]) -> tuple[list[tuple[int, PointIn]], list[RejectedPoint]]:
    """Split a batch into valid points (with their index) and rejected ones (with every error)."""
    try:
        return list(enumerate(_POINTS.validate_python(raw))), []
    except ValidationError:
        pass
    good: list[tuple[int, PointIn]] = []
    bad: list[RejectedPoint] = []
    for i, item in enumerate(raw):
        try:
            good.append((i, _POINT.validate_python(item)))
        except ValidationError as exc:
            step = item.get("step") if isinstance(item, dict) else None
            bad.append(
                RejectedPoint(
                    index=i,
                    step=step if isinstance(step, int) and not isinstance(step, bool) else None,
                    errors=[_describe(e) for e in exc.errors(include_url=False)],
                )
            )
    return good, bad


def _same(a: PointIn, compute: float, pass_rate: float | None, metrics: dict[str, Any] | None) -> bool:
    def close(x: float | None, y: float | None) -> bool:
        return (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-12))

    return close(a.compute, compute) and close(a.pass_rate, pass_rate) and a.metrics == (metrics or {})


_PG_INSERT = text(
    "INSERT INTO metric_points (run_id, step, compute, pass_rate, metrics, curve_index) "
    "SELECT :run_id, t.step, t.compute, t.pass_rate, CASE WHEN t.metrics::text = '{}' THEN NULL ELSE t.metrics END, "
    "t.curve_index FROM json_to_recordset(CAST(:points AS json)) "
    "AS t(step bigint, compute float8, pass_rate float8, metrics json, curve_index bigint) "
    "ON CONFLICT (run_id, step) DO NOTHING"
)
_PG_STORED = text(
    "SELECT step, compute, pass_rate, metrics FROM metric_points "
    "WHERE run_id = :run_id AND step = ANY(CAST(:steps AS bigint[]))"
)
#: SQLite caps the number of bound parameters per statement; look stored steps up in chunks of this size.
_SQLITE_CHUNK = 5000


def _stored(session: Session, run_id: int, steps: list[int]) -> dict[int, Any]:
    """The stored rows of ``run_id`` among ``steps`` (the caller holds the run's lock)."""
    if session.get_bind().dialect.name == "postgresql":
        return {r.step: r for r in session.execute(_PG_STORED, {"run_id": run_id, "steps": steps})}
    found: dict[int, Any] = {}
    table = StoredPoint.__table__
    for i in range(0, len(steps), _SQLITE_CHUNK):
        chunk = steps[i : i + _SQLITE_CHUNK]
        stmt = select(table.c.step, table.c.compute, table.c.pass_rate, table.c.metrics).where(
            table.c.run_id == run_id, table.c.step.in_(chunk)
        )
        found.update({r.step: r for r in session.execute(stmt)})
    return found


def _insert(session: Session, run_id: int, points: list[PointIn], curve_points: int) -> None:
    """Insert new points in one statement (Postgres: a JSON recordset; SQLite: executemany). The run (locked by the
    caller) holds ``curve_points`` points with a pass rate; the new ones are ranked after them in step order."""
    if not points:
        return
    rank: dict[int, int] = {}
    for p in sorted(points, key=lambda p: p.step):
        if p.pass_rate is not None:
            rank[p.step] = curve_points + len(rank)
    rows = [
        {
            "step": p.step,
            "compute": p.compute,
            "pass_rate": p.pass_rate,
            "metrics": p.metrics or None,
            "curve_index": rank.get(p.step),
        }
        for p in points
    ]
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_PG_INSERT, {"run_id": run_id, "points": json.dumps(rows)})
        return
    stmt = sqlite.insert(cast(Table, StoredPoint.__table__)).on_conflict_do_nothing(index_elements=["run_id", "step"])
    session.execute(stmt, [{"run_id": run_id, **r} for r in rows])


def ingest(
    session: Session,
    run: Run,
    experiment: Experiment,
    good: Sequence[tuple[int, PointIn]],
    rejected: Sequence[RejectedPoint],
    factors: Sequence[float],
    actor: str,
) -> IngestOutcome:
    """Store the valid points ``good`` (index in the batch, point) for ``run``; ``rejected`` are reported with any
    points refused here. Refreshes the run's counters and fast fit and emits events."""
    out = IngestOutcome(rejected=list(rejected))
    heard_from(session, run, actor)  # any batch is a sign of life (a silent run that was lost is running again)
    by_step: dict[int, tuple[int, PointIn]] = {}
    for index, point in good:
        seen = by_step.get(point.step)
        if seen is None:
            by_step[point.step] = (index, point)
        elif _same(seen[1], point.compute, point.pass_rate, point.metrics):
            out.duplicates += 1
        else:
            out.rejected.append(
                RejectedPoint(
                    index=index, step=point.step, errors=[f"step {point.step} appears twice with different values"]
                )
            )
    new: list[PointIn] = []
    completed: list[PointIn] = []
    if by_step:
        # Appending after the last stored step (the usual case) cannot collide with a stored point.
        appending = (run.last_step is not None and min(by_step) > run.last_step) or run.n_points == 0
        stored = {} if appending else _stored(session, run.id, list(by_step))
        late: list[tuple[int, PointIn, Any]] = []
        for step, (index, point) in by_step.items():
            row = stored.get(step)
            if row is None:
                new.append(point)
            elif _same(point, row.compute, row.pass_rate, row.metrics) or _contained(point, row):
                out.duplicates += 1
            elif _completes(point, row):
                late.append((index, point, row))
            else:
                out.rejected.append(RejectedPoint(index=index, step=step, errors=[_conflict(step, row)]))
        disorder = order_violations(session, run, new, appending)
        if disorder:
            out.rejected += [RejectedPoint(index=by_step[s][0], step=s, errors=[why]) for s, why in disorder.items()]
            new = [p for p in new if p.step not in disorder]
        completed = _complete_late(session, run, late, new, out)
        _insert(session, run.id, new, run.curve_points)
        out.accepted = len(new) + len(completed)
    out.rejected.sort(key=lambda r: r.index)
    if out.accepted == 0:
        return out
    if new:
        _advance_counters(run, new)
    new = new + completed
    new.sort(key=lambda p: p.step)
    evaluated = sum(p.pass_rate is not None for p in new)
    out.refit = evaluated > 0
    if run.status == "queued":
        transition(session, run, "running", "first metrics received", actor)
    # A notification, not the data: pages refetch what they show (the points are read from GET .../metrics).
    emit(
        session,
        experiment.id,
        "points",
        {
            "run_id": run.id,
            "accepted": out.accepted,
            "evaluated": evaluated,
            "compute_used": run.compute_used,
            "last_step": run.last_step,
        },
        run_id=run.id,
    )
    return out


#: The point fit sees at most this many points of a long curve (evenly thinned, the last one
#: kept); the full fit with intervals, off the request path, sees them all.
MAX_POINT_FIT_POINTS = 2000


def thin(curve: Curve, limit: int = MAX_POINT_FIT_POINTS) -> Curve:
    """At most ``limit`` points of ``curve``, evenly spaced in step order, first and last included."""
    n = len(curve.compute)
    if n <= limit:
        return curve
    keep = np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))
    return Curve(curve.compute[keep], curve.pass_rate[keep])


#: The points of a run at the given ranks (one bound parameter, whatever their number: an array / a JSON array).
_SQLITE_BY_RANK = text(
    "SELECT step, compute, pass_rate FROM metric_points "
    "WHERE run_id = :run_id AND curve_index IN (SELECT value FROM json_each(:ranks))"
)
_PG_BY_RANK = text(
    "SELECT step, compute, pass_rate FROM metric_points "
    "WHERE run_id = :run_id AND curve_index = ANY(CAST(:ranks AS bigint[]))"
)


def load_fit_curve(session: Session, run_id: int, limit: int = MAX_POINT_FIT_POINTS) -> Curve:
    """``thin(load_curve(...), limit)`` read by rank: the at most ``limit`` evenly spaced points with a pass rate
    (first and last included) are looked up by ``curve_index`` through ``ix_metric_points_curve``, so the cost does
    not grow with what the run has stored. Equal to ``thin(load_curve(...))`` when the points arrived in step order
    (the usual case; a step sent late is ranked after the ones stored before it). Runs with unranked points (stored
    outside :func:`ingest`) are read whole."""
    t = cast(Table, StoredPoint.__table__)
    n = session.scalar(select(Run.curve_points).where(Run.id == run_id)) or 0
    base = select(t.c.step, t.c.compute, t.c.pass_rate).where(t.c.run_id == run_id)
    if n <= limit:
        rows = list(session.execute(base.where(t.c.curve_index >= 0)).all())  # a concurrent batch may add some
    else:
        keep = np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64)).tolist()
        if session.get_bind().dialect.name == "postgresql":
            rows = list(session.execute(_PG_BY_RANK, {"run_id": run_id, "ranks": keep}).all())
        else:
            rows = list(session.execute(_SQLITE_BY_RANK, {"run_id": run_id, "ranks": json.dumps(keep)}).all())
        n = len(keep)
    if len(rows) < n:
        return thin(load_curve(session, run_id), limit)
    rows.sort(key=lambda r: r.step)
    curve = Curve(
        np.asarray([r.compute for r in rows], dtype=np.float64),
        np.asarray([r.pass_rate for r in rows], dtype=np.float64),
    )
    return thin(curve, limit)


def point_fit_stale(session: Session, run: Run) -> bool:
    """True when ``run`` has points with a pass rate that its latest fit has not seen: the fit is older than the
    stored points (the server died between the points' commit and their refit). The newest evaluation is the one of
    top rank, and a point fit always keeps it, so one indexed lookup decides."""
    if run.curve_points <= 0:
        return False
    if run.latest_fit_id is None:
        return True
    t = cast(Table, StoredPoint.__table__)
    top = session.scalar(
        select(t.c.compute).where(t.c.run_id == run.id, t.c.curve_index == run.curve_points - 1).limit(1)
    )
    fitted = session.scalar(select(FitSnapshot.compute_max).where(FitSnapshot.id == run.latest_fit_id))
    return top is not None and (fitted is None or fitted < top)


def stale_point_fits(session: Session, limit: int = 1000) -> list[int]:
    """Runs whose latest fit is older than their stored evaluations (:func:`point_fit_stale`), for a sweep at start."""
    t = cast(Table, StoredPoint.__table__)
    top = (
        select(t.c.compute)
        .where(t.c.run_id == Run.id, t.c.curve_index == Run.curve_points - 1)
        .limit(1)
        .scalar_subquery()
    )
    fitted = select(FitSnapshot.compute_max).where(FitSnapshot.id == Run.latest_fit_id).scalar_subquery()
    stmt = (
        select(Run.id)
        .where(Run.curve_points > 0, (Run.latest_fit_id.is_(None)) | (fitted < top))
        .order_by(Run.id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def store_point_fit(session: Session, run_id: int, fit: CurveFit, factors: Sequence[float]) -> FitSnapshot:
    """Store the point fit and emit its event; it becomes the run's latest fit unless a concurrent request already
    stored a fit that reached further (a larger compute)."""
    run = session.scalar(select(Run).where(Run.id == run_id).with_for_update())
    assert run is not None  # runs are never deleted
    current = session.get(FitSnapshot, run.latest_fit_id) if run.latest_fit_id is not None else None
    newest = current is None or float(fit.compute_max) >= current.compute_max
    snap = store_fit(session, run, fit, "point", factors, make_latest=newest)
    emit_fit(session, run, snap)
    return snap


def _contained(point: PointIn, row: Any) -> bool:
    """True when everything ``point`` says is already stored (the resend of an evaluation that completed a stored
    point: its metrics are part of the stored ones)."""
    stored = row.metrics or {}
    return (
        _same(point, row.compute, row.pass_rate, {k: stored[k] for k in point.metrics if k in stored})
        and point.metrics.keys() <= stored.keys()
    )


def _completes(point: PointIn, row: Any) -> bool:
    """True when ``point`` only adds an evaluation to a stored point of the same step and compute that had none
    (the step's training metrics were sent before its evaluation finished, or a trainer resumed from a checkpoint
    evaluates at the checkpoint's step): no stored value changes."""
    if row.pass_rate is not None or point.pass_rate is None:
        return False
    if not math.isclose(point.compute, row.compute, rel_tol=1e-9, abs_tol=1e-12):
        return False
    stored = row.metrics or {}
    return all(k not in stored or stored[k] == v for k, v in point.metrics.items())


def _complete_late(
    session: Session, run: Run, late: list[tuple[int, PointIn, Any]], new: list[PointIn], out: IngestOutcome
) -> list[PointIn]:
    """Store the evaluations of ``late`` points into their stored rows when the curve stays in step order (each is
    after the run's last evaluated step and before this batch's new evaluations); the others are rejected as
    conflicts. Ranks them on the curve and counts them; returns those stored."""
    done: list[PointIn] = []
    if not late:
        return done
    t = cast(Table, StoredPoint.__table__)
    last_curve_step = session.scalar(
        select(t.c.step).where(t.c.run_id == run.id, t.c.curve_index == run.curve_points - 1).limit(1)
    )
    first_new = min((p.step for p in new if p.pass_rate is not None), default=None)
    for index, point, row in sorted(late, key=lambda item: item[1].step):
        after_curve = last_curve_step is None or point.step > last_curve_step
        if not after_curve or (first_new is not None and point.step > first_new):
            out.rejected.append(RejectedPoint(index=index, step=point.step, errors=[_conflict(point.step, row)]))
            continue
        metrics = {**(row.metrics or {}), **point.metrics} or None
        session.execute(
            update(t)
            .where(t.c.run_id == run.id, t.c.step == point.step)
            .values(pass_rate=point.pass_rate, metrics=metrics, curve_index=run.curve_points)
        )
        run.curve_points += 1
        last_curve_step = point.step
        done.append(point)
    return done


def _conflict(step: int, row: Any) -> str:
    return (
        f"step {step} is already stored with other values (compute={row.compute}, pass_rate={row.pass_rate}); "
        "stored points are never overwritten"
    )


def _advance_counters(run: Run, new: list[PointIn]) -> None:
    """Points are append-only and the caller holds the run's lock, so the counters advance exactly."""
    run.n_points += len(new)
    run.curve_points += sum(p.pass_rate is not None for p in new)
    run.compute_used = max(run.compute_used, max(p.compute for p in new))
    top = max(p.step for p in new)
    run.last_step = top if run.last_step is None else max(run.last_step, top)
