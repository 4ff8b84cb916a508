"""The questions users ask of a fitted curve, answered with the point fit and the posterior draws.

Every function takes a :class:`~rl_core.scaling.fit.forecast.CurveFit` and returns a small frozen dataclass; none
raises on a fit without parameters (its numbers are then ``None``/NaN and ``reason`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from rl_core.scaling.fit.calibration import forecast_summary
from rl_core.scaling.fit.data import prepare_curve
from rl_core.scaling.fit.fit_fast import fit_fixed_ceiling
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, Prediction, fit_curve
from rl_core.scaling.fit.model import FloatArray, SigmoidParams
from rl_core.scaling.fit.posterior import equal_tailed
from rl_core.scaling.fit.search import SearchBox

#: The paper's error margin on A (three independent ScaleRL runs agreed within ±0.015).
CEILING_MARGIN = 0.02


def value_at(fit: CurveFit, compute: float, level: float | None = None) -> Prediction:
    """Pass rate forecast at ``compute`` with its predictive band: the calibrated forecast of a measured value
    (:func:`~rl_core.scaling.fit.calibration.forecast_summary`), the one every surface shows."""
    summary = forecast_summary(fit, np.array([compute], dtype=np.float64), "measurement", level)
    if summary is None:
        return fit.predict([compute], level)[0]
    value, lo, hi = (float(v[0]) for v in summary)
    return Prediction(float(compute), value, lo, hi)


def _compute_for(R0: FloatArray, A: FloatArray, B: FloatArray, C_mid: FloatArray, target: float) -> FloatArray:
    """Compute at which R(C) = target for each parameter set; inf where the target is never reached."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        frac = (target - R0) / (A - R0)
        c = C_mid * (frac / (1.0 - frac)) ** (1.0 / B)
    reached_at_zero = (target - R0) * np.sign(A - R0) <= 0
    out = np.where(reached_at_zero, 0.0, np.where((frac > 0) & (frac < 1), c, np.inf))
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class Reach:
    """Compute needed to reach ``target``; ``compute`` is ``inf`` when the fitted ceiling is below it."""

    target: float
    compute: float | None
    lo: float | None
    hi: float | None
    probability: float | None
    """Posterior probability that the target is ever reached (``None`` without intervals)."""
    reason: str


def compute_to_reach(fit: CurveFit, target: float, level: float | None = None) -> Reach:
    """Compute needed for the curve to reach ``target`` pass rate, with an interval over the posterior. With
    draws, the compute is their median (``inf`` when most never reach it), so it lies inside its interval."""
    p = fit.params
    if p is None:
        return Reach(target, None, None, None, None, fit.message)
    point = float(_compute_for(np.array([p.R0]), np.array([p.A]), np.array([p.B]), np.array([p.C_mid]), target)[0])
    s = fit.samples
    if s is None:
        lo = hi = prob = None
    else:
        draws = _compute_for(s.R0, s.A, s.B, s.C_mid, target)
        prob = float(np.mean(np.isfinite(draws)))
        q = (1.0 - (level or fit.level)) / 2.0
        # no interpolation between draws, so draws that never reach the target (inf) give inf, not NaN
        lo, point, hi = (float(v) for v in np.quantile(draws, [q, 0.5, 1.0 - q], method="inverted_cdf"))
    if np.isinf(point):
        ceiling = p.A if s is None else float(np.median(s.A))
        reason = f"target {target:.3f} is above the fitted ceiling A={ceiling:.3f}"
    else:
        reason = f"reaches {target:.3f} at compute {point:.4g}"
    return Reach(target, point, lo, hi, prob, reason)


@dataclass(frozen=True)
class Gain:
    """Forecast change in pass rate from scaling compute ``compute`` by ``factor``."""

    compute: float
    factor: float
    before: float
    after: float
    gain: float
    lo: float | None
    hi: float | None


#: Where a fit keeps its gains by (compute, factor, level), in its ``__dict__`` beside its frozen fields.
_GAINS_MEMO = "_gains"


def gain_from_scaling(fit: CurveFit, compute: float, factor: float, level: float | None = None) -> Gain | None:
    """R(factor·C) − R(C) on the fitted curve, with an interval over the posterior (curves, no noise)."""
    p = fit.params
    if p is None or not (np.isfinite(compute) and np.isfinite(factor)) or compute < 0 or factor <= 0:
        return None
    # Kept beside the fit's frozen fields (as its summaries are): a run's recommendation asks this of its fit at every
    # decision, and a caller that keeps its fits between decisions (the Optuna pruner) asks it again and again.
    memo: dict[tuple[float, float, float | None], Gain] = fit.__dict__.setdefault(_GAINS_MEMO, {})
    key = (float(compute), float(factor), level)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _gain(fit, p, compute, factor, level)
    return found


def _gain(fit: CurveFit, p: SigmoidParams, compute: float, factor: float, level: float | None) -> Gain:
    c = np.array([compute, compute * factor], dtype=np.float64)
    if fit.samples is None:
        before, after = (float(v) for v in p(c))
        return Gain(compute, factor, before, after, after - before, None, None)
    # One posterior summary (rl_core.scaling.fit.summary): medians of the same draws as the interval, so the gain
    # shown always lies inside its own interval.
    curves = fit.samples.curves(c)
    lo_a, hi_a = equal_tailed(curves[:, 1] - curves[:, 0], level or fit.level)
    before, after = (float(v) for v in np.median(curves, axis=0))
    gain = float(np.median(curves[:, 1] - curves[:, 0]))
    return Gain(compute, factor, before, after, gain, float(lo_a), float(hi_a))


Verdict = Literal["i_higher_ceiling", "j_higher_ceiling", "i_more_efficient", "j_more_efficient", "undecided"]


@dataclass(frozen=True)
class CeilingComparison:
    """The paper's comparison of two runs: ceilings first (±margin), then B at a common A."""

    verdict: Verdict
    reason: str
    A_i: float | None
    A_j: float | None
    difference: float | None
    probability_i_higher: float | None
    common_A: float | None = None
    B_i: float | None = None
    B_j: float | None = None


def compare_ceilings(
    x_i: ArrayLike,
    y_i: ArrayLike,
    x_j: ArrayLike,
    y_j: ArrayLike,
    margin: float = CEILING_MARGIN,
    options: FitOptions | None = None,
) -> CeilingComparison:
    """Is run i's ceiling above run j's?

    If |A_i − A_j| > ``margin`` the higher A wins. Otherwise both runs are refitted with A fixed at their average
    and the larger B (the more compute-efficient run) wins, as in the paper.
    """
    fi, fj = fit_curve(x_i, y_i, options), fit_curve(x_j, y_j, options)
    if fi.params is None or fj.params is None:
        bad = "i" if fi.params is None else "j"
        return CeilingComparison(
            "undecided", f"run {bad} has no fit: {(fi if bad == 'i' else fj).message}", None, None, None, None
        )
    a_i, a_j = fi.params.A, fj.params.A
    prob = None
    if fi.samples is not None and fj.samples is not None:
        prob = float(np.mean(fi.samples.A > fj.samples.A))
    diff = a_i - a_j
    if abs(diff) > margin:
        verdict: Verdict = "i_higher_ceiling" if diff > 0 else "j_higher_ceiling"
        reason = f"ceilings differ by {diff:+.3f} (> ±{margin}): A_i={a_i:.3f}, A_j={a_j:.3f}"
        return CeilingComparison(verdict, reason, a_i, a_j, diff, prob)
    common = 0.5 * (a_i + a_j)
    b_i = _refit_b(fi, x_i, y_i, common, options)
    b_j = _refit_b(fj, x_j, y_j, common, options)
    if b_i is None or b_j is None or np.isclose(b_i, b_j, rtol=1e-3):
        return CeilingComparison(
            "undecided", f"same ceiling within ±{margin} and same efficiency", a_i, a_j, diff, prob, common, b_i, b_j
        )
    verdict = "i_more_efficient" if b_i > b_j else "j_more_efficient"
    reason = (
        f"same ceiling within ±{margin} (A_i={a_i:.3f}, A_j={a_j:.3f}); refitted at A={common:.3f}, "
        f"B_i={b_i:.3g} vs B_j={b_j:.3g}"
    )
    return CeilingComparison(verdict, reason, a_i, a_j, diff, prob, common, b_i, b_j)


def _refit_b(fit: CurveFit, x: ArrayLike, y: ArrayLike, ceiling: float, options: FitOptions | None) -> float | None:
    """B of the curve refitted with A held at ``ceiling`` (same cleaning, burn-in and R0 as ``fit``)."""
    opts = options or FitOptions()
    curve = prepare_curve(x, y, burn_in=fit.burn_in, fit_until=opts.fit_until)
    p: SigmoidParams | None = fit.params
    if p is None or curve.n_positive < 3:
        return None
    r0 = None if fit.r0_fitted else p.R0
    return fit_fixed_ceiling(curve.x, curve.y, r0, ceiling, SearchBox.for_data(curve.x)).params.B
