"""An experiment's adaptive band (opt-in with the grid document's ``fit: {adaptive_band: true}``).

At each assessment, each run's earlier forecasts (its ``full`` fit snapshots, which keep their calibrated band:
:func:`server.assess.forecasting.band_record`) are scored against the run's points that arrived after them, and
:func:`rl_core.scaling.fit.adaptive_band.experiment_band_scale` turns those residuals into one multiplier of the
calibrated band's half-widths. :func:`server.assess.deciding.decide` sets it on its copies of the fits
(``CurveFit.band_scale``), so the band and interval the pages show and the draws the grid decisions compare come from
the same scaled forecast draws.

Cheap by construction: one query of the experiment's full snapshots' (id, run, compute), then the bodies of at most
:data:`MAX_FORECASTS` snapshots per run; no fit is made. Invariant: with no usable residual the multiplier is exactly
1.0 (every number as without the option).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from rl_core.scaling.fit.adaptive_band import (
    DEFAULT_OPTIONS,
    AdaptiveBandOptions,
    ForecastResidual,
    band_scores,
    experiment_band_scale,
)
from rl_core.scaling.fit.model import FloatArray
from server.assess.forecasting import BAND_KEY, Curve
from server.store.models import FitSnapshot

#: Earlier forecasts scored per run: the latest snapshot at or before each of ``MAX_FORECASTS`` computes, spaced
#: ``min_reach``, 2, 4, 8 x ``min_reach`` e-folds below the run's newest point (so that each has points far enough
#: past its data to count).
MAX_FORECASTS = 4


@dataclass(frozen=True)
class ExperimentBand:
    """The experiment's band multiplier and what it came from."""

    scale: float
    """Multiplier of the calibrated band's half-widths (exactly 1.0 without usable residuals)."""
    residuals: int
    """Points scored (finite scores at least ``min_reach`` e-folds past their forecast's data)."""
    runs: int
    """Runs those points belong to (each run weighs 1 in the multiplier)."""
    forecasts: int
    """Earlier forecasts (fit snapshots) scored."""


def chosen_snapshots(rows: Sequence[tuple[int, float]], top: float, min_reach: float) -> list[int]:
    """Of one run's full snapshots ``(id, compute_max)`` (ids grow with time), the ids scored against its points up
    to ``top``: for each of :data:`MAX_FORECASTS` computes ``top * exp(-min_reach * 2**j)``, the latest snapshot made
    at or below it (distinct)."""
    out: list[int] = []
    reach = max(min_reach, 0.05)
    for j in range(MAX_FORECASTS):
        target = top * float(np.exp(-reach * 2**j))
        below = [(c, i) for i, c in rows if 0.0 < c <= target * (1 + 1e-12)]
        if below:
            pick = max(below)[1]
            if pick not in out:
                out.append(pick)
    return out


def _interp(x: FloatArray, xp: Sequence[float], fp: Sequence[float]) -> FloatArray:
    """``fp`` (given at ``xp``) at ``x``, linear in log compute."""
    xs = np.log(np.asarray(xp, dtype=np.float64))
    return np.asarray(np.interp(np.log(x), xs, np.asarray(fp, dtype=np.float64)), dtype=np.float64)


def snapshot_residuals(
    run_id: int, compute_max: float, record: Mapping[str, object], curve: Curve
) -> list[ForecastResidual]:
    """The residuals of one stored forecast: the run's points past its data and within its stored band's range,
    against the band (interpolated in log compute)."""
    xs, centre, lo, hi = (record.get(k) for k in ("compute", "centre", "lo", "hi"))
    if not all(isinstance(v, list) and len(v) >= 2 for v in (xs, centre, lo, hi)):
        return []
    assert isinstance(xs, list) and isinstance(centre, list) and isinstance(lo, list) and isinstance(hi, list)
    if any(v is None for v in (*xs, *centre, *lo, *hi)):
        return []
    later = (curve.compute > compute_max) & (curve.compute <= float(xs[-1]))
    if not later.any():
        return []
    x, y = curve.compute[later], curve.pass_rate[later]
    c, a, b = _interp(x, xs, centre), _interp(x, xs, lo), _interp(x, xs, hi)
    reach = np.log(x / compute_max)
    return [
        ForecastResidual(float(yi), float(ci), float(ai), float(bi), float(ri), str(run_id))
        for yi, ci, ai, bi, ri in zip(y, c, a, b, reach, strict=True)
    ]


def experiment_band(
    session: Session, curves: Mapping[int, Curve], level: float, options: AdaptiveBandOptions | None = None
) -> ExperimentBand:
    """The experiment's band multiplier from its runs' (``curves``: each run's points by id) earlier forecasts,
    scored at ``level`` (the fits' level, that of the stored bands)."""
    opts = options or replace(DEFAULT_OPTIONS, level=level)
    tops = {rid: float(c.compute.max()) for rid, c in curves.items() if c.compute.size}
    if not tops:
        return ExperimentBand(1.0, 0, 0, 0)
    rows = session.execute(
        select(FitSnapshot.id, FitSnapshot.run_id, FitSnapshot.compute_max)
        .where(FitSnapshot.run_id.in_(list(tops)), FitSnapshot.kind == "full")
        .order_by(FitSnapshot.id)
    ).all()
    by_run: dict[int, list[tuple[int, float]]] = {}
    for sid, rid, cmax in rows:
        by_run.setdefault(int(rid), []).append((int(sid), float(cmax)))
    chosen = [sid for rid, snaps in by_run.items() for sid in chosen_snapshots(snaps, tops[rid], opts.min_reach)]
    if not chosen:
        return ExperimentBand(1.0, 0, 0, 0)
    residuals: list[ForecastResidual] = []
    forecasts = 0
    for rid, cmax, body in session.execute(
        select(FitSnapshot.run_id, FitSnapshot.compute_max, FitSnapshot.body).where(FitSnapshot.id.in_(chosen))
    ).all():
        record = (body or {}).get(BAND_KEY)
        if not isinstance(record, dict):
            continue  # stored before the option was on (or without posterior draws): no band to score against
        found = snapshot_residuals(int(rid), float(cmax), record, curves[int(rid)])
        if found:
            forecasts += 1
            residuals.extend(found)
    if not residuals:
        return ExperimentBand(1.0, 0, 0, forecasts)
    scores = band_scores(
        np.array([r.y for r in residuals]),
        np.array([r.centre for r in residuals]),
        np.array([r.lo for r in residuals]),
        np.array([r.hi for r in residuals]),
    )
    used = [r for r, s in zip(residuals, scores, strict=True) if np.isfinite(s) and r.reach >= opts.min_reach - 1e-12]
    k = experiment_band_scale(residuals, opts)
    return ExperimentBand(k, len(used), len({r.source for r in used}), forecasts)
