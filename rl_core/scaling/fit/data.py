"""Cleaning a curve before it is fitted: the only place that decides which points a fit sees.

Invariants of :class:`PreparedCurve`: ``x`` is strictly increasing, finite and >= 0; ``y`` is finite and in
[0, 1]; every dropped or merged point is explained in ``messages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from rl_core.scaling.fit.model import FloatArray

#: Default burn-in: points with compute below this fraction of the largest compute in the fit window are left out,
#: the analogue of the paper's ~1.5k GPU-hours for ablations fitted up to 8k (one noisy, near-linear epoch).
#: Chosen before looking at the backtest's best value (0.25 did marginally better there); see docs/forecasting.md.
DEFAULT_BURN_IN_FRACTION = 0.2
#: A fit needs at least this many points with positive compute after burn-in (3 free parameters + 1 dof).
MIN_POINTS = 4


@dataclass(frozen=True)
class PreparedCurve:
    """Points a fit uses (``x``, ``y``) plus what was observed before them."""

    x: FloatArray
    y: FloatArray
    r0_observed: float | None
    """Pass rate at the smallest compute of the whole (cleaned) curve: the default R0."""
    x_observed_max: float
    """Largest compute of the cleaned curve inside the fit window (0 when empty)."""
    burn_in: float
    messages: list[str] = field(default_factory=list)
    starts_at_zero: bool = True
    """Whether the first (cleaned) evaluation is at zero compute, i.e. ``r0_observed`` is the untrained checkpoint."""
    r0_compute: float | None = None
    """The compute of that first evaluation (before any burn-in: ``x[0]`` may be later)."""

    @property
    def n_positive(self) -> int:
        return int(np.count_nonzero(self.x > 0))


def clean_points(x: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray, list[str]]:
    """Drop non-finite, negative-compute and out-of-[0,1] points, sort by compute, average duplicate computes."""
    messages: list[str] = []
    try:
        xa = np.asarray(x, dtype=np.float64).ravel()
        ya = np.asarray(y, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return np.empty(0), np.empty(0), ["inputs are not numeric"]
    if xa.shape != ya.shape:
        n = min(xa.size, ya.size)
        messages.append(f"compute and pass-rate lengths differ ({xa.size} vs {ya.size}); used the first {n}")
        xa, ya = xa[:n], ya[:n]
    finite = np.isfinite(xa) & np.isfinite(ya)
    if (bad := int(np.count_nonzero(~finite))) > 0:
        messages.append(f"dropped {bad} point(s) with NaN or infinite values")
    xa, ya = xa[finite], ya[finite]
    negative = xa < 0
    if (bad := int(np.count_nonzero(negative))) > 0:
        messages.append(f"dropped {bad} point(s) with negative compute")
    xa, ya = xa[~negative], ya[~negative]
    outside = (ya < 0) | (ya > 1)
    if (bad := int(np.count_nonzero(outside))) > 0:
        messages.append(f"dropped {bad} point(s) whose pass rate is outside [0, 1]")
    xa, ya = xa[~outside], ya[~outside]
    if xa.size and np.any(np.diff(xa) < 0):
        messages.append("sorted points by compute")
    order = np.argsort(xa, kind="stable")
    xa, ya = xa[order], ya[order]
    unique_x, inverse, counts = np.unique(xa, return_inverse=True, return_counts=True)
    if unique_x.size < xa.size:
        messages.append(f"averaged {xa.size - unique_x.size} duplicate compute value(s)")
        ya = np.bincount(inverse, weights=ya) / counts
        xa = unique_x
    return xa, ya, messages


def prepare_curve(
    x: ArrayLike,
    y: ArrayLike,
    *,
    burn_in: float | None = None,
    burn_in_fraction: float = DEFAULT_BURN_IN_FRACTION,
    fit_until: float | None = None,
) -> PreparedCurve:
    """Clean the points, cut them to ``fit_until`` and leave out the burn-in.

    ``burn_in`` (absolute compute) wins over ``burn_in_fraction`` (of the largest compute in the window). The
    burn-in never removes points such that fewer than :data:`MIN_POINTS` positive-compute points remain; points at
    exactly zero compute are kept (they pin R(0) = R0 and carry no burn-in noise).
    """
    xa, ya, messages = clean_points(x, y)
    r0 = float(ya[0]) if ya.size else None
    starts_at_zero = bool(xa.size) and float(xa[0]) == 0.0
    r0_compute = float(xa[0]) if xa.size else None
    if fit_until is not None and np.isfinite(fit_until):
        keep = xa <= fit_until
        if (cut := int(np.count_nonzero(~keep))) > 0:
            messages.append(f"left out {cut} point(s) after fit_until={fit_until:g}")
        xa, ya = xa[keep], ya[keep]
    x_max = float(xa[-1]) if xa.size else 0.0
    threshold = burn_in if burn_in is not None else burn_in_fraction * x_max
    if not np.isfinite(threshold) or threshold < 0:
        messages.append(f"ignored invalid burn-in {threshold!r}")
        threshold = 0.0
    in_burn = (xa > 0) & (xa < threshold)
    positive_after = int(np.count_nonzero((xa > 0) & ~in_burn))
    if np.any(in_burn) and positive_after < MIN_POINTS:
        # Shrink the burn-in to the largest one that still leaves MIN_POINTS points.
        positive = xa[xa > 0]
        if positive.size >= MIN_POINTS:
            threshold = float(positive[-MIN_POINTS])
            in_burn = (xa > 0) & (xa < threshold)
            messages.append(f"burn-in reduced to {threshold:g} to keep {MIN_POINTS} points")
        else:
            threshold, in_burn = 0.0, np.zeros_like(xa, dtype=bool)
            messages.append("burn-in not applied: too few points")
    if (dropped := int(np.count_nonzero(in_burn))) > 0:
        messages.append(f"left out {dropped} burn-in point(s) below compute {threshold:g}")
    return PreparedCurve(
        x=xa[~in_burn],
        y=ya[~in_burn],
        r0_observed=r0,
        x_observed_max=x_max,
        burn_in=float(threshold),
        messages=messages,
        starts_at_zero=starts_at_zero,
        r0_compute=r0_compute,
    )
