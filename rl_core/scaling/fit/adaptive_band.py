"""Bands that learn from the experiment they are in: an online conformal scale for the calibrated forecast band.

The shipped calibration (:mod:`rl_core.scaling.fit.calibration`) makes the 80% band cover about 80% of held-out
points *over the collections it learned from*; on one experiment it can be too narrow (CS336: 0.60-0.67) or too wide
(DEEP-GRPO: 0.92-0.95). As an experiment goes on, its earlier forecasts meet the points that arrive after them. Each
such residual, measured in units of the band's half-width on its side of the centre (:func:`band_scores`), is a
conformal score: the band covered the point exactly when the score is at most 1. The experiment's own scale is the
``level`` quantile of its scores, and the adaptive band multiplies both half-widths by

    k = clip(q ** (n / (n + prior_strength)), min_scale, max_scale)

where ``q`` is the weighted quantile of the scores and ``n`` the effective number of independent residuals (the sum
of the weights: weigh each earlier forecast, or each run, as 1 in total). With no residuals ``k`` is exactly 1 (the
shipped band, unchanged); with few it stays near 1 (shrinkage in log space, seeded by the shipped calibration); with
many it approaches the experiment's own conformal quantile. Only the band moves: the centre (the point forecast) is
never changed.

numpy only: this module is read by the service and must never import torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.fit.model import FloatArray

#: A half-width below this is treated as zero (nothing to scale; a score against it is not informative).
_TINY = 1e-9


@dataclass(frozen=True)
class AdaptiveBandOptions:
    """How strongly an experiment's own residuals move its band."""

    level: float = 0.8
    """The band's level (the shipped calibration's): the quantile of the scores that the scale targets."""
    prior_strength: float = 5.0
    """Pseudo-residuals at scale 1 (the shipped calibration): with ``n`` residuals the experiment's own quantile
    gets ``n / (n + prior_strength)`` of the weight in log space. Chosen before the backtest, not tuned on it."""
    min_reach: float = 0.25
    """Residuals count only at points at least this many e-folds of compute past the data of the forecast that made
    them (when their reach is given): a band is read far past the data, and the error right next to the data is
    mostly noise. 0.25 was chosen on the leave-one-collection-out backtest it is reported with (0 and 0.5 tried)."""
    min_scale: float = 0.5
    max_scale: float = 3.0
    """Bounds on the multiplier: a handful of lucky or unlucky residuals never collapses or explodes a band."""

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ValueError("level must be in (0, 1)")
        if self.min_reach < 0.0 or self.prior_strength < 0.0 or not 0.0 < self.min_scale <= 1.0 <= self.max_scale:
            raise ValueError("prior_strength must be >= 0 and min_scale <= 1 <= max_scale, both positive")


DEFAULT_OPTIONS = AdaptiveBandOptions()


def band_scores(y: FloatArray, centre: FloatArray, lo: FloatArray, hi: FloatArray) -> FloatArray:
    """Each observed value's distance from the forecast's centre in units of the band's half-width on its side
    (``<= 1``: inside the band). Points whose side has no width (a degenerate band) score NaN and are ignored by
    :func:`adaptive_scale`."""
    y, c = np.asarray(y, dtype=np.float64), np.asarray(centre, dtype=np.float64)
    up, down = np.asarray(hi, dtype=np.float64) - c, c - np.asarray(lo, dtype=np.float64)
    above = y >= c
    width = np.where(above, up, down)
    dist = np.abs(y - c)
    out = np.where(width > _TINY, dist / np.maximum(width, _TINY), np.nan)
    return np.asarray(out, dtype=np.float64)


def weighted_quantile(values: FloatArray, weights: FloatArray, q: float) -> float:
    """The smallest value whose cumulative weight share reaches ``q`` (the conformal quantile of weighted scores)."""
    order = np.argsort(values)
    cum = np.cumsum(np.asarray(weights, dtype=np.float64)[order])
    idx = int(np.searchsorted(cum / cum[-1], q - 1e-12))
    return float(np.asarray(values)[order][min(idx, len(order) - 1)])


def adaptive_scale(
    scores: FloatArray,
    weights: FloatArray | None = None,
    options: AdaptiveBandOptions = DEFAULT_OPTIONS,
    reach: FloatArray | None = None,
) -> float:
    """The multiplier of the calibrated band's half-widths given an experiment's earlier scores (:func:`band_scores`).

    ``weights`` (default 1 each) say how much each score counts; their sum is the effective number of residuals
    ``n`` (weigh each earlier forecast or run as 1 in total, since its points are not independent). ``reach`` (e-folds
    past the data of the forecast that made each score), when given, drops the scores below ``options.min_reach``
    before anything else. Exactly 1.0 without usable scores; otherwise
    ``clip(q ** (n / (n + prior_strength)), min_scale, max_scale)`` with ``q`` the weighted ``level`` quantile of the
    scores."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if w.shape != s.shape:
        raise ValueError("scores and weights must have the same length")
    keep = np.isfinite(s) & np.isfinite(w) & (w > 0.0)
    if reach is not None:
        r = np.asarray(reach, dtype=np.float64).ravel()
        if r.shape != s.shape:
            raise ValueError("scores and reach must have the same length")
        keep &= r >= options.min_reach - 1e-12
    if not keep.any():
        return 1.0
    s, w = s[keep], w[keep]
    n = float(w.sum())
    q = max(weighted_quantile(s, w, options.level), _TINY)
    shrink = n / (n + options.prior_strength)
    k = float(np.exp(shrink * np.log(q)))
    return float(np.clip(k, options.min_scale, options.max_scale))


def scale_band(centre: FloatArray, lo: FloatArray, hi: FloatArray, k: float) -> tuple[FloatArray, FloatArray]:
    """(lo, hi) with both half-widths multiplied by ``k`` around ``centre``, kept in [0, 1]. ``k == 1`` returns the
    band unchanged (bit for bit)."""
    if k == 1.0:
        return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    c = np.asarray(centre, dtype=np.float64)
    new_lo = c - k * (c - np.asarray(lo, dtype=np.float64))
    new_hi = c + k * (np.asarray(hi, dtype=np.float64) - c)
    return np.asarray(np.clip(new_lo, 0.0, 1.0)), np.asarray(np.clip(new_hi, 0.0, 1.0))


def scale_draws(draws: FloatArray, k: float) -> FloatArray:
    """Forecast draws (N, M) spread ``k`` times as far from their per-column median, kept in [0, 1]: every
    equal-tailed interval of the result is the scaled interval (before clipping), the median is unchanged. ``k == 1``
    returns the draws unchanged."""
    d = np.asarray(draws, dtype=np.float64)
    if k == 1.0:
        return d
    med = np.median(d, axis=0)
    return np.asarray(np.clip(med + k * (d - med), 0.0, 1.0))


@dataclass(frozen=True)
class ForecastResidual:
    """One earlier forecast of an experiment meeting a point that arrived after it: the observed value ``y``, the
    forecast's centre and calibrated band (``lo``, ``hi``) at that point's compute, how far past the forecast's data
    the point lies (``reach``, e-folds of compute: ln(x / last x the forecast saw)), and ``source``, what made the
    forecast (a run's id, or run and cut-off): each source weighs 1 in total, since its points are not independent."""

    y: float
    centre: float
    lo: float
    hi: float
    reach: float
    source: str


def experiment_band_scale(
    residuals: Sequence[ForecastResidual], options: AdaptiveBandOptions = DEFAULT_OPTIONS
) -> float:
    """The multiplier of an experiment's calibrated band half-widths from its own past forecast residuals: each
    scored in half-widths (:func:`band_scores`), each source weighing 1 over its points, residuals closer than
    ``options.min_reach`` to their forecast's data left out, then :func:`adaptive_scale` (exactly 1.0 with none:
    the shipped calibration). Pure: no I/O, nothing stored; the caller keeps the residuals."""
    if not residuals:
        return 1.0
    y = np.array([r.y for r in residuals], dtype=np.float64)
    centre = np.array([r.centre for r in residuals], dtype=np.float64)
    lo = np.array([r.lo for r in residuals], dtype=np.float64)
    hi = np.array([r.hi for r in residuals], dtype=np.float64)
    reach = np.array([r.reach for r in residuals], dtype=np.float64)
    scores = band_scores(y, centre, lo, hi)
    usable = np.isfinite(scores) & (reach >= options.min_reach - 1e-12)
    counts: dict[str, int] = {}
    for r, ok in zip(residuals, usable, strict=True):
        if ok:
            counts[r.source] = counts.get(r.source, 0) + 1
    weights = np.array(
        [1.0 / counts[r.source] if ok else 0.0 for r, ok in zip(residuals, usable, strict=True)], dtype=np.float64
    )
    return adaptive_scale(scores, weights, options, reach)
