"""Batched, idempotent ingestion of metric points.

Invariants: a stored point is never changed (resending it is a no-op; resending its step with other values is
rejected); a run's compute never decreases as its step grows (:mod:`server.intake.compute_order`); every point is
validated on its own, so bad points never cost the good ones sent with them; the run's counters are refreshed in the
same transaction as the points. Nothing here fits: :attr:`IngestOutcome.refit` tells the caller that the run's point
fit (:mod:`server.assess.point_fit`) is due after the commit."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Table, select, text, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session

from server.base.safeinput import clip
from server.intake.compute_order import order_violations
from server.intake.schemas import MetricPoint as PointIn
from server.intake.schemas import RejectedPoint
from server.lifecycle.runs import seen as heard_from
from server.lifecycle.runs import transition
from server.store.events import emit
from server.store.models import Experiment, FitSnapshot, Run, StoredPoint

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
    if run.status == "queued" and out.accepted + out.duplicates > 0:
        # Points it already holds start it too: a trainer resumed from its checkpoint re-sends the steps since it,
        # and a run reopened for it must not wait queued for a step it has not seen.
        transition(session, run, "running", "first metrics received", actor)
    if out.accepted == 0:
        return out
    if new:
        _advance_counters(run, new)
    new = new + completed
    new.sort(key=lambda p: p.step)
    evaluated = sum(p.pass_rate is not None for p in new)
    out.refit = evaluated > 0
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
