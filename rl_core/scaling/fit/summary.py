"""One posterior summary of a fit: every estimate a surface shows sits inside its own interval.

A fit has two descriptions of its parameters: the least-squares (or penalised) point in ``CurveFit.params`` and the
posterior draws in ``CurveFit.samples``, from which the intervals come. On a ridge of near-equal fits the point can
sit outside its own interval (A = 1.000 on the bound next to [0.676, 0.957]), so a page that shows the point beside
the interval contradicts itself. :func:`summarize` gives one summary for both.

Invariants (asserted by ``tests/scaling/fit/test_summary.py`` over random, real and early-cut curves):

- with draws, every estimate is the median of its draws and its interval the equal-tailed ``level`` interval of the
  same draws, so ``lo <= value <= hi``;
- values at a compute are summarised by :func:`rl_core.scaling.fit.calibration.curve_summary` (the median of the
  calibrated forecast draws there, with its interval from the same draws);
- without draws (a fit made without intervals) the estimates are the point fit's and the intervals are ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.fit.posterior import equal_tailed

if TYPE_CHECKING:  # the fit's type only: forecast.py reads this module for CurveFit.to_dict
    from rl_core.scaling.fit.forecast import CurveFit

PARAMETERS = ("R0", "A", "B", "C_mid")
#: A fitted ceiling this close to 1 sits on the box's bound: not evidence of anything.
A_BOUND_TOLERANCE = 1e-3
#: A ceiling whose interval is wider than this is not identified (``Policy.max_ceiling_width``'s default).
MAX_CEILING_WIDTH = 0.25


def on_bound(fit: CurveFit) -> bool:
    """The fitted ceiling sits on the A = 1 bound (or there is no fit): not evidence of anything."""
    return fit.params is None or fit.params.A >= 1.0 - A_BOUND_TOLERANCE


@dataclass(frozen=True)
class Estimate:
    """A number and its interval (both ``None`` where the fit has none)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class FitSummary:
    """The parameters' estimates and whether the ceiling is identified (see the module invariants)."""

    estimates: dict[str, Estimate]
    ceiling_identified: bool
    """*Identified*, the one meaning every surface uses: the fit is ``ok``, its point ceiling is off the A = 1 bound
    and inside its own interval (not a ridge of near-equal fits), and that interval is at most ``max_ceiling_width``
    wide. Otherwise the ceiling is shown as not identified and never compared as a number."""
    level: float

    def value(self, name: str) -> float | None:
        return self.estimates[name].value if name in self.estimates else None


def _median_and_interval(draws: FloatArray, level: float) -> Estimate:
    lo, hi = equal_tailed(draws, level)
    return Estimate(float(np.median(draws)), float(lo), float(hi))


#: Where a fit keeps its summaries by ``max_ceiling_width`` (in its ``__dict__``, beside its frozen fields): a fit
#: is summarised again and again (its forecast draws, its decision, its page; 13 times a run, 0.25 s of a 60-run
#: grid's 3.5 s assessment), and its fields never change, so it is computed once.
_MEMO = "_summaries"


def summarize(fit: CurveFit, max_ceiling_width: float | None = MAX_CEILING_WIDTH) -> FitSummary:
    """The fit's one summary: posterior medians with equal-tailed intervals, or the point fit without draws.
    ``max_ceiling_width``: the policy's (``None``: no width rule, only the bound and the ridge: the feature the
    forecast calibration's blend was learned on, not what a surface calls identified). Computed once per fit and
    width (the same object each time: do not change it)."""
    memo: dict[float | None, FitSummary] = fit.__dict__.setdefault(_MEMO, {})
    found = memo.get(max_ceiling_width)
    if found is None:
        found = memo[max_ceiling_width] = _summarize(fit, max_ceiling_width)
    return found


def _summarize(fit: CurveFit, max_ceiling_width: float | None) -> FitSummary:
    p = fit.params
    if p is None:
        return FitSummary({k: Estimate(None) for k in PARAMETERS}, False, fit.level)
    s = fit.samples
    if s is None:
        return FitSummary(
            {k: Estimate(float(getattr(p, k))) for k in PARAMETERS}, fit.status == "ok" and not on_bound(fit), fit.level
        )
    estimates = {k: _median_and_interval(np.asarray(getattr(s, k), dtype=np.float64), fit.level) for k in PARAMETERS}
    a = estimates["A"]
    assert a.lo is not None and a.hi is not None
    narrow = max_ceiling_width is None or a.hi - a.lo <= max_ceiling_width
    identified = fit.status == "ok" and not on_bound(fit) and a.lo <= p.A <= a.hi and narrow
    return FitSummary(estimates, identified, fit.level)
