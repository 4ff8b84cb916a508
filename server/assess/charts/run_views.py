"""One run's read models: its metrics against step (downsampled) with the current forecast, and its fit history."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling import sigmoid
from server.assess.assessing import ParsedAssessments, latest
from server.assess.charts.chart import last_event_id
from server.assess.charts.downsample import log_x, lttb, rounded
from server.assess.charts.schemas import FitHistory, HistoryPoint, RunSeries
from server.assess.schemas import Series
from server.lifecycle.runs import as_utc
from server.lifecycle.spec import ExperimentSpec
from server.store.models import FitSnapshot, Run, StoredPoint

#: "What happened": the mean of the run's last few pass rates.
OBSERVED_TAIL = 3
#: A run within this fraction of its budget has reached it.
REACHED = 0.98


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def run_series(
    session: Session, run: Run, spec: ExperimentSpec, parsed: ParsedAssessments, max_points: int
) -> RunSeries:
    last_event = last_event_id(session, spec.id)
    rows = session.execute(
        select(StoredPoint.step, StoredPoint.compute, StoredPoint.pass_rate, StoredPoint.metrics)
        .where(StoredPoint.run_id == run.id)
        .order_by(StoredPoint.step)
    ).all()
    with_rate = [(s, c, p) for s, c, p, _ in rows if p is not None]
    x = np.array([c for _, c, _ in with_rate], dtype=np.float64)
    y = np.array([p for _, _, p in with_rate], dtype=np.float64)
    keep = lttb(log_x(x), y, max_points) if x.size else np.empty(0, dtype=np.int64)
    series: dict[str, tuple[list[float], list[float]]] = {}
    for step, _, _, metrics in rows:
        for name, value in (metrics or {}).items():
            if isinstance(value, int | float) and math.isfinite(value):
                xs, ys = series.setdefault(name, ([], []))
                xs.append(float(step))
                ys.append(float(value))
    metrics_out: dict[str, Series] = {}
    for name, (xs, ys) in sorted(series.items()):
        ax, ay = np.array(xs), np.array(ys)
        idx = lttb(ax, ay, max_points)
        metrics_out[name] = Series(x=rounded(ax[idx]), y=rounded(ay[idx]))
    assessment = latest(session, spec, parsed)
    entry = next((e for e in assessment.runs if e.id == run.id), None)
    return RunSeries(
        run_id=run.id,
        experiment_id=run.experiment_id,
        compute_unit=assessment.compute_unit,
        points=Series(x=rounded(x[keep]), y=rounded(y[keep])),
        points_steps=[int(with_rate[i][0]) for i in keep],
        points_total=int(x.size),
        metrics=metrics_out,
        fitted=None if entry is None else entry.fitted,
        extrapolation=None if entry is None else entry.extrapolation,
        band=None if entry is None else entry.band,
        fit_status="insufficient_data" if entry is None else entry.fit_status,
        fit_message="not assessed yet" if entry is None else entry.fit_message,
        burn_in=None if entry is None else entry.burn_in,
        last_event_id=last_event,
        assessment_version=assessment.version,
    )


def _at_budget(snap: FitSnapshot, budget: float | None) -> tuple[float | None, float | None, float | None]:
    """The snapshot's forecast at the run's current budget: the mean from its parameters, the band when the
    snapshot predicted at that same budget."""
    body = snap.body
    if budget is None or snap.A is None or snap.B is None or snap.C_mid is None or body.get("R0") is None:
        return None, None, None
    mean = _finite(float(sigmoid(np.array([budget]), float(body["R0"]), snap.A, snap.B, snap.C_mid)[0]))
    for p in body.get("predictions") or []:
        if math.isclose(float(p.get("compute", -1)), budget, rel_tol=1e-9):
            return mean, _finite(p.get("lo")), _finite(p.get("hi"))
    return mean, None, None


def fit_history(session: Session, run: Run, max_points: int) -> FitHistory:
    ids = list(session.scalars(select(FitSnapshot.id).where(FitSnapshot.run_id == run.id).order_by(FitSnapshot.id)))
    if len(ids) > max_points:
        picks = np.unique(np.linspace(0, len(ids) - 1, max_points).round().astype(np.int64))
        ids = [ids[int(i)] for i in picks]
    snaps = session.scalars(select(FitSnapshot).where(FitSnapshot.id.in_(ids)).order_by(FitSnapshot.id)).all()
    out = []
    for s in snaps:
        ci = s.body.get("ci") or {}
        lo, hi = (ci.get("A") or [None, None])[:2]
        mean, b_lo, b_hi = _at_budget(s, run.budget)
        out.append(
            HistoryPoint(
                id=s.id,
                kind=s.kind,  # type: ignore[arg-type]
                created_at=as_utc(s.created_at),
                n_points=s.n_points,
                compute_max=s.compute_max,
                status=s.status,
                A=s.A,
                A_lo=_finite(lo),
                A_hi=_finite(hi),
                at_budget=mean,
                at_budget_lo=b_lo,
                at_budget_hi=b_hi,
            )
        )
    tail = list(
        session.scalars(
            select(StoredPoint.pass_rate)
            .where(StoredPoint.run_id == run.id, StoredPoint.pass_rate.is_not(None))
            .order_by(StoredPoint.step.desc())
            .limit(OBSERVED_TAIL)
        )
    )
    latest = float(np.mean([v for v in tail if v is not None])) if tail else None
    reached = run.budget is not None and run.compute_used >= REACHED * run.budget
    total = session.scalar(select(func.count()).select_from(FitSnapshot).where(FitSnapshot.run_id == run.id)) or 0
    return FitHistory(
        run_id=run.id,
        budget=run.budget,
        total=int(total),
        snapshots=out,
        observed_latest=latest,
        observed_at_budget=latest if reached else None,
    )
