"""Batched, idempotent ingestion of metric points, followed by the fast refit of the run.

Invariants: a stored point is never changed (resending it is a no-op; resending its step with other values is
rejected); every point is validated on its own, so bad points never cost the good ones sent with them; the run's
counters and fit are refreshed in the same transaction as the points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Insert, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from server.events import emit
from server.forecasting import fit_run_curve, fit_spec_of, load_curve, store_fit
from server.models import Experiment, FitSnapshot, MetricPoint, Run
from server.runs import transition
from server.schemas import MetricPoint as PointIn
from server.schemas import RejectedPoint

_POINTS = TypeAdapter(list[PointIn])
_POINT = TypeAdapter(PointIn)
#: A ``points`` event carries at most this many points; clients read the rest from ``GET .../metrics``.
EVENT_POINTS = 200


@dataclass
class IngestOutcome:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[RejectedPoint] = field(default_factory=list)
    fit: FitSnapshot | None = None


def _describe(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
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


def _insert_ignoring_duplicates(session: Session, rows: list[dict[str, Any]]) -> set[int]:
    """Insert rows, skipping steps already stored; returns the steps actually inserted."""
    dialect = session.get_bind().dialect.name
    stmt: Insert
    if dialect == "postgresql":
        stmt = postgresql.insert(MetricPoint).on_conflict_do_nothing(index_elements=["run_id", "step"])
    elif dialect == "sqlite":
        stmt = sqlite.insert(MetricPoint).on_conflict_do_nothing(index_elements=["run_id", "step"])
    else:  # pragma: no cover - only the two supported databases reach here
        raise RuntimeError(f"unsupported database {dialect}")
    result = session.execute(stmt.returning(MetricPoint.step), rows)
    return set(result.scalars().all())


def ingest(
    session: Session, run: Run, experiment: Experiment, raw: Sequence[Any], factors: Sequence[float], actor: str
) -> IngestOutcome:
    """Store the valid points of ``raw`` for ``run``, refresh its counters and fast fit, and emit events."""
    out = IngestOutcome()
    good, out.rejected = validate_points(raw)
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
    if by_step:
        rows = [
            {
                "run_id": run.id,
                "step": p.step,
                "compute": p.compute,
                "pass_rate": p.pass_rate,
                "metrics": p.metrics or None,
            }
            for _, p in by_step.values()
        ]
        inserted = _insert_ignoring_duplicates(session, rows)
        out.accepted = len(inserted)
        _check_resent(session, run.id, by_step, inserted, out)
    out.rejected.sort(key=lambda r: r.index)
    if out.accepted == 0:
        return out
    _refresh_counters(session, run)
    if run.status == "queued":
        transition(session, run, "running", "first metrics received", actor)
    new_points = sorted((p for _, p in by_step.values()), key=lambda p: p.step)
    curve_points = [[p.step, p.compute, p.pass_rate] for p in new_points if p.pass_rate is not None]
    emit(
        session,
        experiment.id,
        "points",
        {
            "run_id": run.id,
            "accepted": out.accepted,
            "points": curve_points[-EVENT_POINTS:],
            "truncated": len(curve_points) > EVENT_POINTS,
            "compute_used": run.compute_used,
            "last_step": run.last_step,
        },
        run_id=run.id,
    )
    if curve_points:
        fit = fit_run_curve(load_curve(session, run.id), fit_spec_of(experiment), intervals=False)
        out.fit = store_fit(session, run, fit, "point", factors)
    return out


def _check_resent(
    session: Session, run_id: int, by_step: dict[int, tuple[int, PointIn]], inserted: set[int], out: IngestOutcome
) -> None:
    """Points not inserted were stored before: identical ones are duplicates, different ones are rejected."""
    resent = [s for s in by_step if s not in inserted]
    if not resent:
        return
    stored = {
        row.step: row
        for row in session.execute(
            select(MetricPoint.step, MetricPoint.compute, MetricPoint.pass_rate, MetricPoint.metrics).where(
                MetricPoint.run_id == run_id, MetricPoint.step.in_(resent)
            )
        )
    }
    for step in resent:
        index, point = by_step[step]
        row = stored[step]
        if _same(point, row.compute, row.pass_rate, row.metrics):
            out.duplicates += 1
        else:
            out.rejected.append(
                RejectedPoint(
                    index=index,
                    step=step,
                    errors=[
                        f"step {step} is already stored with other values (compute={row.compute}, "
                        f"pass_rate={row.pass_rate}); stored points are never overwritten"
                    ],
                )
            )


def _refresh_counters(session: Session, run: Run) -> None:
    count, compute_max, step_max = session.execute(
        select(func.count(), func.max(MetricPoint.compute), func.max(MetricPoint.step)).where(
            MetricPoint.run_id == run.id
        )
    ).one()
    run.n_points = int(count)
    run.compute_used = float(compute_max or 0.0)
    run.last_step = None if step_max is None else int(step_max)
