"""Turning a fit into chart traces: the sigmoid over the observed range, its extrapolation to the budget, the band."""

from __future__ import annotations

import math

import numpy as np

from rl_core.scaling import CurveFit
from server.routes.dashboard.downsample import rounded
from server.routes.dashboard.schemas import Band, Forecast, Series

#: Points along each drawn curve (log-spaced); enough for a smooth sigmoid at any zoom a page allows.
CURVE_POINTS = 48
BAND_POINTS = 24


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(f"{float(v):.6g}")


def _series(fit: CurveFit, lo: float, hi: float, n: int) -> Series | None:
    if fit.params is None or not (0 < lo < hi):
        return None
    x = np.geomspace(lo, hi, n)
    return Series(x=rounded(x), y=[_finite(float(v)) for v in fit.params(x)])


def fitted_and_extrapolation(
    fit: CurveFit, compute_min: float, budget: float | None
) -> tuple[Series | None, Series | None]:
    """The curve over [compute_min, compute_max] and from compute_max to the budget (if beyond)."""
    if fit.params is None or fit.compute_max <= 0:
        return None, None
    start = compute_min if compute_min > 0 else fit.compute_max / 100.0
    fitted = _series(fit, start, fit.compute_max, CURVE_POINTS)
    extra = None
    if budget is not None and budget > fit.compute_max * 1.001:
        extra = _series(fit, fit.compute_max, budget, CURVE_POINTS // 2)
    return fitted, extra


def band(fit: CurveFit, budget: float | None) -> Band | None:
    """The predictive band from the last observed compute to the budget (needs posterior samples)."""
    if fit.samples is None or fit.params is None or budget is None or budget <= fit.compute_max * 1.001:
        return None
    x = np.geomspace(fit.compute_max, budget, BAND_POINTS)
    preds = fit.predict(x)
    return Band(x=rounded(x), lo=[_finite(p.lo) for p in preds], hi=[_finite(p.hi) for p in preds])


def at(fit: CurveFit, compute: float | None) -> Forecast | None:
    """The forecast (mean and band) at one compute."""
    if fit.params is None or compute is None or compute <= 0:
        return None
    p = fit.predict([compute])[0]
    return Forecast(compute=compute, mean=_finite(p.mean), lo=_finite(p.lo), hi=_finite(p.hi))


def interval(fit: CurveFit, name: str) -> tuple[float | None, float | None]:
    lo, hi = (fit.intervals or {}).get(name, (None, None))
    return _finite(lo), _finite(hi)
