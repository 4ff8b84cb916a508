"""Comparing runs of a grid where they have both been: observed pass rates at equal compute, no fit involved.

A forecast needs a few points per run; a run evaluated sparsely (large steps, a large batch) may not have them until
half its budget is spent. What the grid already knows before then is how each run stands against the others at the
same compute. :func:`behind_at_equal_compute` measures that gap on the run's last evaluations against every other
run's curve (interpolated between its own evaluations, never extrapolated) and compares it with the evaluation noise
pooled over the grid.

Invariants: only observed points are used; a comparator must have reached (and started before) the compute of every
point compared; the noise is estimated from the grid's own residuals around a straight line between neighbouring
evaluations, and without enough residuals there is no verdict (``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.model import FloatArray

#: Median of a chi-square variable with one degree of freedom: turns the median squared residual into a variance.
_CHI2_1_MEDIAN = 0.4549364
#: Fewer residuals than this over the whole grid: the noise is not known, so no run is called behind.
MIN_RESIDUALS = 6


@dataclass(frozen=True)
class Behind:
    """Run ``i`` against the run it trails most at equal compute: the mean gap over its last ``points`` evaluations
    and the threshold that gap had to exceed (margin + z · noise · sqrt(2 / points))."""

    comparator: int
    gap: float
    threshold: float
    noise: float
    points: int

    @property
    def is_behind(self) -> bool:
        return self.gap > self.threshold


def pooled_noise(curves: Sequence[tuple[FloatArray, FloatArray]], skip: int = 2) -> float | None:
    """Evaluation noise (standard deviation of one evaluation) pooled over the grid, or ``None`` without
    :data:`MIN_RESIDUALS` residuals. Each residual is a point's distance from the straight line through its two
    neighbours, scaled to unit variance under white noise; the first ``skip`` points (the steep start) are left out."""
    scaled: list[float] = []
    for x, y in curves:
        for k in range(max(skip, 1), x.size - 1):
            x0, x1, x2 = x[k - 1], x[k], x[k + 1]
            if not x2 > x0:
                continue
            w0, w2 = (x2 - x1) / (x2 - x0), (x1 - x0) / (x2 - x0)
            r = y[k] - (w0 * y[k - 1] + w2 * y[k + 1])
            scaled.append(float(r * r / (1.0 + w0 * w0 + w2 * w2)))
    if len(scaled) < MIN_RESIDUALS:
        return None
    return float(np.sqrt(np.median(scaled) / _CHI2_1_MEDIAN))


def _interpolate(x: FloatArray, y: FloatArray, at: FloatArray) -> FloatArray | None:
    """The run's curve at ``at`` (linear between its evaluations), or ``None`` where it has not been."""
    if x.size < 2 or at.min() < x[0] or at.max() > x[-1]:
        return None
    return np.interp(at, x, y)


def behind_at_equal_compute(
    curves: Sequence[tuple[FloatArray, FloatArray]],
    i: int,
    comparators: Sequence[int],
    noise: float,
    margin: float,
    z: float,
    points: int = 2,
) -> Behind | None:
    """How far run ``i`` trails the best of ``comparators`` at equal compute, on its last ``points`` evaluations
    after its first (the start is shared by the grid and says nothing); ``None`` when no comparator has been where
    those evaluations are."""
    x, y = curves[i]
    m = min(points, x.size - 1)
    if m < 1:
        return None
    at, mine = x[-m:], y[-m:]
    best: tuple[float, int] | None = None
    for j in comparators:
        if j == i:
            continue
        theirs = _interpolate(*curves[j], at)
        if theirs is None:
            continue
        gap = float(np.mean(theirs - mine))
        if best is None or gap > best[0]:
            best = (gap, j)
    if best is None:
        return None
    threshold = margin + z * noise * float(np.sqrt(2.0 / m))
    return Behind(best[1], best[0], threshold, noise, m)
