"""The experiment chart: every run's downsampled points, its fitted sigmoid, extrapolation and (top runs) band.

Fits come from the service's fit cache (full fits with intervals, refreshed by the interval refitter), so a chart
request reuses them. Invariant: a chart of any number of runs carries about ``TOTAL_POINTS`` points.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit
from server.models import Event, Experiment, Run, StoredPoint, utcnow
from server.recommending import FitCache, RunFit, experiment_fits
from server.routes.dashboard.curves import at, band, fitted_and_extrapolation, interval
from server.routes.dashboard.downsample import FloatArray, log_x, lttb, per_run_budget, rounded
from server.routes.dashboard.schemas import ChartOut, ChartRun, Series

TOTAL_POINTS = 20_000


def _points_by_run(session: Session, experiment_id: int) -> dict[int, tuple[FloatArray, FloatArray]]:
    rows = session.execute(
        select(StoredPoint.run_id, StoredPoint.compute, StoredPoint.pass_rate)
        .join(Run, Run.id == StoredPoint.run_id)
        .where(Run.experiment_id == experiment_id, StoredPoint.pass_rate.is_not(None))
        .order_by(StoredPoint.run_id, StoredPoint.step)
    ).all()
    grouped: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for run_id, compute, pass_rate in rows:
        grouped[run_id].append((compute, float(pass_rate or 0.0)))
    return {
        k: (np.array([c for c, _ in v], dtype=np.float64), np.array([p for _, p in v], dtype=np.float64))
        for k, v in grouped.items()
    }


def last_event_id(session: Session, experiment_id: int) -> int:
    """The newest event of the experiment (read before the data, so a client streaming after it misses nothing)."""
    return int(session.scalar(select(func.max(Event.id)).where(Event.experiment_id == experiment_id)) or 0)


def burn_in_of(fit: CurveFit) -> float | None:
    """The compute below which the fit left points out (None when it left none out)."""
    return float(fit.burn_in) if fit.burn_in and fit.burn_in > 0 else None


def _usable(fit: CurveFit) -> bool:
    return fit.params is not None and fit.status == "ok"


def _ranks(values: dict[int, float | None]) -> dict[int, int]:
    ordered = sorted((v, k) for k, v in values.items() if v is not None)
    return {k: i + 1 for i, (_, k) in enumerate(reversed(ordered))}


def build_chart(
    session: Session,
    experiment: Experiment,
    cache: FitCache,
    *,
    max_points: int,
    highlight: int,
    include: Sequence[int] = (),
) -> ChartOut:
    last_event = last_event_id(session, experiment.id)
    as_of = utcnow()
    fits: list[RunFit] = experiment_fits(session, experiment, cache)
    curves = _points_by_run(session, experiment.id)
    per_run = per_run_budget(len(fits), TOTAL_POINTS, max_points)
    ceilings = {rf.run.id: (rf.fit.params.A if rf.fit.params is not None and _usable(rf.fit) else None) for rf in fits}
    forecasts = {rf.run.id: at(rf.fit, rf.run.budget) if _usable(rf.fit) else None for rf in fits}
    rank_a = _ranks(ceilings)
    rank_b = _ranks({k: (f.mean if f is not None else None) for k, f in forecasts.items()})
    top = {k for k, r in rank_a.items() if r <= highlight} | set(include)
    for rf in fits:  # free highlight slots go to the other runs in order: a small grid is drawn all in colour
        if len(top) >= highlight:
            break
        top.add(rf.run.id)
    runs: list[ChartRun] = []
    for index, rf in enumerate(fits):
        run, fit = rf.run, rf.fit
        x, y = curves.get(run.id, (np.empty(0), np.empty(0)))
        keep = lttb(log_x(x), y, per_run) if x.size else np.empty(0, dtype=np.int64)
        fitted, extra = fitted_and_extrapolation(fit, float(x.min()) if x.size else 0.0, run.budget)
        p = fit.params
        a_lo, a_hi = interval(fit, "A")
        b_lo, b_hi = interval(fit, "B")
        c_lo, c_hi = interval(fit, "C_mid")
        runs.append(
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
                fit_status=fit.status,
                fit_message=fit.message,
                level=fit.level,
                R0=None if p is None else p.R0,
                A=None if p is None else p.A,
                A_lo=a_lo,
                A_hi=a_hi,
                B=None if p is None else p.B,
                B_lo=b_lo,
                B_hi=b_hi,
                C_mid=None if p is None else p.C_mid,
                C_mid_lo=c_lo,
                C_mid_hi=c_hi,
                at_budget=forecasts[run.id],
                rank_ceiling=rank_a.get(run.id),
                rank_at_budget=rank_b.get(run.id),
                points=Series(x=rounded(x[keep]), y=rounded(y[keep])),
                points_total=int(x.size),
                fitted=fitted,
                extrapolation=extra,
                band=band(fit, run.budget) if run.id in top and _usable(fit) else None,
                burn_in=burn_in_of(fit),
            )
        )
    budgets = [r.budget for r in runs if r.budget is not None]
    return ChartOut(
        experiment_id=experiment.id,
        name=experiment.name,
        compute_unit=str(experiment.document.get("compute_unit", "compute")),
        max_budget=max(budgets) if budgets else None,
        highlight=highlight,
        last_event_id=last_event,
        as_of=as_of,
        as_of_step=max((rf.run.last_step for rf in fits if rf.run.last_step is not None), default=None),
        runs=runs,
    )
