"""Comparing runs of a grid where they have both been: observed pass rates at equal compute, no fit involved.

A forecast needs a few points per run; a run evaluated sparsely (large steps, a large batch) may not have them until
half its budget is spent. What the grid already knows before then is how each run stands against the others at the
same compute. :func:`behind_at_equal_compute` measures that gap on the run's last evaluations against every other
run's curve (interpolated between its own evaluations, never extrapolated) and compares it with the noise of such a
gap: the evaluation noise pooled over the grid, or, where the grid has seeds of one recipe, the spread between those
seeds at that compute (:func:`seed_spread`), whichever is larger.

Invariants: only observed points are used; a comparator must have reached (and started before) the compute of every
point compared; the noise is estimated from the grid's own residuals around a straight line between neighbouring
evaluations, and without enough residuals there is no verdict (``None``); the seed spread is measured between seeds
that have all been at the compute compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.fit.model import FloatArray

#: Median of a chi-square variable with one degree of freedom: turns the median squared residual into a variance.
_CHI2_1_MEDIAN = 0.4549364
#: Fewer residuals than this over the whole grid: the noise is not known, so no run is called behind.
MIN_RESIDUALS = 6


@dataclass(frozen=True)
class Behind:
    """Run ``i`` against the run it trails most at equal compute: the mean gap over its last ``points`` evaluations
    and the threshold that gap had to exceed: margin + max(z · noise · sqrt(2 / points), seed_z · seed_spread ·
    sqrt(2))."""

    comparator: int
    gap: float
    threshold: float
    noise: float
    points: int
    seed_spread: float | None = None
    """The spread between seeds of one recipe at this compute, when it set the threshold (else ``None``)."""

    def numbers(self) -> dict[str, float]:
        """What a *behind* stop stores beside its reason (``seed_spread`` only when it set the threshold)."""
        out = {"gap_at_equal_compute": self.gap, "gap_threshold": self.threshold, "evaluation_noise": self.noise}
        return out if self.seed_spread is None else {**out, "seed_spread": self.seed_spread}

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


def pooled_spread(groups: Iterable[Sequence[float]]) -> float | None:
    """The standard deviation within groups (the seeds of each recipe), pooled over the groups of two or more
    values; ``None`` without such a group."""
    arrays = [np.asarray(g, dtype=np.float64) for g in groups if len(g) >= 2]
    dof = sum(a.size - 1 for a in arrays)
    if dof == 0:
        return None
    return float(np.sqrt(sum(float(np.sum((a - a.mean()) ** 2)) for a in arrays) / dof))


def seed_spread(
    curves: Sequence[tuple[FloatArray, FloatArray]], recipes: Sequence[str | None], at: float
) -> float | None:
    """The spread between seeds of one recipe at compute ``at`` (each seed's curve interpolated there),
    :func:`pooled_spread` over the recipes with at least two seeds that have been there; ``None`` without such a
    recipe. Two runs of different recipes then differ at equal compute by about this × sqrt(2) from the seeds
    alone: on curves whose take-off time varies from seed to seed, far more than the evaluation noise."""
    values: dict[str, list[float]] = {}
    point = np.array([at], dtype=np.float64)
    for (x, y), recipe in zip(curves, recipes, strict=True):
        if recipe is None:
            continue
        v = _interpolate(x, y, point)
        if v is not None:
            values.setdefault(recipe, []).append(float(v[0]))
    return pooled_spread(values.values())


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
    seeds: float | None = None,
    seed_z: float = float("inf"),
) -> Behind | None:
    """How far run ``i`` trails the best of ``comparators`` at equal compute, on its last ``points`` evaluations
    after its first (the start is shared by the grid and says nothing); ``None`` when no comparator has been where
    those evaluations are. ``seeds``: the grid's :func:`seed_spread` at the run's last evaluation, if known; the gap
    must then also exceed ``seed_z`` × it × sqrt(2) (``inf``: the spread is not used)."""
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
    eval_term = z * noise * float(np.sqrt(2.0 / m))
    seed_term = seed_z * seeds * float(np.sqrt(2.0)) if seeds is not None and np.isfinite(seed_z) else 0.0
    threshold = margin + max(eval_term, seed_term)
    return Behind(best[1], best[0], threshold, noise, m, seeds if seed_term > eval_term else None)
