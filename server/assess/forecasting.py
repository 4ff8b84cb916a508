"""Fitting a run's curve from its stored points and keeping the history of fits.

Every fit goes through ``rl_core.scaling.fit_curve``; this module only loads points, chooses where to predict and
stores snapshots. Invariant: a snapshot is never updated; ``runs.latest_fit_id`` points at the newest one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit, fit_curve
from rl_core.scaling.fit.calibration import forecast_summary, load_calibration
from server.base.jsonsafe import json_safe
from server.lifecycle.grid import FitSpec
from server.store.events import emit
from server.store.models import FitSnapshot, Run, StoredPoint

FitKind = Literal["point", "full"]


@dataclass(frozen=True)
class Curve:
    compute: np.ndarray[Any, np.dtype[np.float64]]
    pass_rate: np.ndarray[Any, np.dtype[np.float64]]


def load_curve(session: Session, run_id: int) -> Curve:
    """The run's (compute, pass rate) points that have a pass rate, in step order."""
    t = cast(Table, StoredPoint.__table__)  # Core, not ORM: this runs on every metrics batch
    rows = session.execute(
        select(t.c.compute, t.c.pass_rate).where(t.c.run_id == run_id, t.c.pass_rate.is_not(None)).order_by(t.c.step)
    ).all()
    if not rows:
        return Curve(np.empty(0), np.empty(0))
    compute, pass_rate = zip(*rows, strict=True)
    return Curve(np.asarray(compute, dtype=np.float64), np.asarray(pass_rate, dtype=np.float64))


def fit_run_curve(curve: Curve, spec: FitSpec, *, intervals: bool) -> CurveFit:
    """The run's fit: the cheap point fit, or with posterior intervals (and the power law) when ``intervals``."""
    return fit_curve(curve.compute, curve.pass_rate, spec.options(), intervals=intervals, power_law=intervals)


def prediction_points(run: Run, factors: Sequence[float]) -> list[float]:
    """Where a snapshot predicts: multiples of the run's budget (or of its compute so far)."""
    horizon = run.budget if run.budget is not None else run.compute_used
    return [horizon * f for f in factors] if horizon and horizon > 0 else []


#: The key of a snapshot body that holds its band for the experiment's adaptive band (:func:`band_record`).
BAND_KEY = "adaptive_band"
#: Computes the band is stored at, log-spaced from the fit's last compute to the run's budget.
BAND_RECORD_POINTS = 16
#: Without a budget, the band is stored this many e-folds of compute past the fit's data.
BAND_RECORD_EFOLDS = 3.0


def band_record(fit: CurveFit, budget: float | None) -> dict[str, Any] | None:
    """What a full snapshot keeps so that an experiment's later points can be scored against it
    (:mod:`server.assess.adaptive`): the forecast of a measured value with the shipped calibration (never an adaptive
    multiplier) at the fit's level, at :data:`BAND_RECORD_POINTS` computes log-spaced from the fit's last compute to
    the budget. ``None`` without posterior draws or without compute left before the budget. (A snapshot's
    parameters alone do not give its band: the band is a summary of the posterior draws, which are not stored.)"""
    if fit.samples is None or fit.params is None or not fit.usable or fit.compute_max <= 0:
        return None
    top = fit.compute_max * float(np.exp(BAND_RECORD_EFOLDS)) if budget is None else float(budget)
    if top <= fit.compute_max * 1.001:
        return None
    compute = np.geomspace(fit.compute_max, top, BAND_RECORD_POINTS)
    shipped = fit if fit.band_scale == 1.0 else replace(fit, band_scale=1.0)
    calibration = load_calibration()
    summary = forecast_summary(shipped, compute, "measurement", calibration=calibration)
    if summary is None:
        return None
    centre, lo, hi = summary
    return {
        "calibration": calibration.version,
        "level": fit.level,
        "compute": [float(v) for v in compute],
        "centre": [float(v) for v in centre],
        "lo": [float(v) for v in lo],
        "hi": [float(v) for v in hi],
    }


def store_fit(
    session: Session,
    run: Run,
    fit: CurveFit,
    kind: FitKind,
    factors: Sequence[float],
    *,
    make_latest: bool = True,
    band: bool = False,
) -> FitSnapshot:
    """Append a snapshot and (if ``make_latest``) point the run at it; :func:`emit_fit` publishes it. With ``band``
    (an experiment whose ``fit.adaptive_band`` is on) the body also keeps its :func:`band_record` under
    :data:`BAND_KEY`."""
    body = json_safe(fit.to_dict(predict_at=prediction_points(run, factors) if fit.params is not None else []))
    record = band_record(fit, run.budget) if band else None
    if record is not None:
        body[BAND_KEY] = json_safe(record)
    snap = FitSnapshot(
        run_id=run.id,
        kind=kind,
        n_points=fit.n_points,
        compute_max=float(fit.compute_max),
        status=fit.status,
        A=body["A"],
        B=body["B"],
        C_mid=body["C_mid"],
        body=body,
    )
    session.add(snap)
    session.flush()
    if make_latest:
        run.latest_fit_id = snap.id
    return snap


def emit_fit(session: Session, run: Run, snap: FitSnapshot) -> None:
    """The ``fit`` event of a stored snapshot."""
    data = {"run_id": run.id, "fit_id": snap.id, "kind": snap.kind, "fit": snap.body}
    emit(session, run.experiment_id, "fit", data, run_id=run.id)
