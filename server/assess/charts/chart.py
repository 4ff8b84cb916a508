"""The experiment chart: every run's downsampled points, its fitted sigmoid, extrapolation and (top runs) band.

Curves, bands, estimates and ranks come from the experiment's stored assessment (the same numbers as the runs
table, the banner and the card); a chart request fits nothing. Invariant: a chart of any number of runs carries
about ``TOTAL_POINTS`` points.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.assess.assessing import ParsedAssessments, latest
from server.assess.charts.downsample import FloatArray, log_x, lttb, per_run_budget, rounded
from server.assess.charts.schemas import ChartOut, ChartRun, Forecast
from server.assess.recommending import experiment_runs
from server.assess.schemas import FitEstimates, Series
from server.base.lru import Bounded
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Event, Run, StoredPoint, utcnow

TOTAL_POINTS = 20_000


class CurveCache:
    """Each run's pass-rate curve by (run id, its count of pass-rate points, its creation time): points are
    append-only, so the count identifies the curve and a chart reads from the database only the runs that got new
    points (the creation time tells apart runs of a database that was emptied and reused the ids)."""

    def __init__(self, size: int = 4096) -> None:
        self._curves: Bounded[tuple[int, int, object], tuple[FloatArray, FloatArray]] = Bounded(size)

    def points_by_run(self, session: Session, runs: Sequence[Run]) -> dict[int, tuple[FloatArray, FloatArray]]:
        """Every run's stored (compute, pass rate) points in step order."""
        out: dict[int, tuple[FloatArray, FloatArray]] = {}
        for run in runs:
            hit = self._curves.get((run.id, run.curve_points, run.created_at))
            if hit is not None:
                out[run.id] = hit
        missing = [run.id for run in runs if run.id not in out]
        if not missing:
            return out
        rows = session.execute(
            select(StoredPoint.run_id, StoredPoint.compute, StoredPoint.pass_rate)
            .where(StoredPoint.run_id.in_(missing), StoredPoint.pass_rate.is_not(None))
            .order_by(StoredPoint.run_id, StoredPoint.step)
        ).all()
        grouped: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for run_id, compute, pass_rate in rows:
            grouped[run_id].append((compute, float(pass_rate or 0.0)))
        counts = {run.id: run.curve_points for run in runs}
        created = {run.id: run.created_at for run in runs}
        for k, v in grouped.items():
            arrays = (np.array([c for c, _ in v], dtype=np.float64), np.array([p for _, p in v], dtype=np.float64))
            out[k] = arrays
            if len(v) == counts.get(k):  # read exactly the counted curve (no point arrived in between)
                self._curves.put((k, len(v), created[k]), arrays)
        return out


def last_event_id(session: Session, experiment_id: int) -> int:
    """The newest event of the experiment (read before the data, so a client streaming after it misses nothing)."""
    return int(session.scalar(select(func.max(Event.id)).where(Event.experiment_id == experiment_id)) or 0)


def build_chart(
    session: Session,
    spec: ExperimentSpec,
    parsed: ParsedAssessments,
    curves_cache: CurveCache,
    *,
    max_points: int,
    highlight: int,
    include: Sequence[int] = (),
) -> ChartOut:
    """The chart of the experiment's stored assessment (:func:`server.assess.assessing.latest`): its curves, bands,
    estimates and ranks, with the runs' stored points. Fits nothing."""
    experiment = spec.experiment
    last_event = last_event_id(session, experiment.id)
    as_of = utcnow()
    assessment = latest(session, spec, parsed)
    runs_by_id = {r.id: r for r in experiment_runs(session, experiment)}
    entries = [e for e in assessment.runs if e.id in runs_by_id]
    curves = curves_cache.points_by_run(session, list(runs_by_id.values()))
    per_run = per_run_budget(len(entries), TOTAL_POINTS, max_points)
    rank_a = {e.id: e.rank_ceiling for e in entries if e.rank_ceiling is not None}
    top = {k for k, r in rank_a.items() if r <= highlight} | set(include)
    for e in entries:  # free highlight slots go to the other runs in order: a small grid is drawn all in colour
        if len(top) >= highlight:
            break
        top.add(e.id)
    out: list[ChartRun] = []
    for index, e in enumerate(entries):
        run = runs_by_id[e.id]
        x, y = curves.get(run.id, (np.empty(0), np.empty(0)))
        keep = lttb(log_x(x), y, per_run) if x.size else np.empty(0, dtype=np.int64)
        at_budget = (
            None
            if run.budget is None or e.V_budget is None
            else Forecast(compute=run.budget, mean=e.V_budget, lo=e.V_lo, hi=e.V_hi)
        )
        out.append(
            ChartRun(
                id=run.id,
                name=run.name,
                index=index,
                status=run.status,  # type: ignore[arg-type]
                status_reason=run.status_reason,
                overrides=run.overrides or {},
                budget=run.budget,
                compute_used=run.compute_used,
                n_points=run.n_points,
                highlighted=run.id in top,
                fit_status=e.fit_status,
                fit_message=e.fit_message,
                level=e.level,
                **e.model_dump(include=set(FitEstimates.model_fields)),  # the table's estimates, as they are
                at_budget=at_budget,
                rank_ceiling=e.rank_ceiling,
                rank_at_budget=e.rank_at_budget,
                points=Series(x=rounded(x[keep]), y=rounded(y[keep])),
                points_total=int(x.size),
                fitted=e.fitted,
                extrapolation=e.extrapolation,
                forecast=e.forecast,
                band=e.band if run.id in top else None,
                burn_in=e.burn_in,
            )
        )
    budgets = [r.budget for r in out if r.budget is not None]
    return ChartOut(
        experiment_id=experiment.id,
        name=experiment.name,
        compute_unit=assessment.compute_unit,
        max_budget=max(budgets) if budgets else None,
        highlight=highlight,
        last_event_id=last_event,
        as_of=as_of,
        as_of_step=max((r.last_step for r in runs_by_id.values() if r.last_step is not None), default=None),
        runs=out,
        assessment_version=assessment.version,
        computed_at=assessment.computed_at,
        pending=assessment.pending,
    )
