"""Backtest of the adaptive band (:mod:`rl_core.scaling.fit.adaptive_band`) on cached forecast cases.

A collection plays one experiment whose runs progress together: at a cut-off ``f`` every run has shown the first
``f`` of its x range. The forecast of a curve at ``f`` is read with the calibration (learned without this
collection, as in :func:`~.calibration_learn.leave_one_collection_out`); its *adaptive* band is the same band scaled
by :func:`~rl_core.scaling.fit.adaptive_band.adaptive_scale` of the residuals the experiment has seen by then:

- the earlier forecasts (cut-offs ``f' < f``, same fitter) of the *other* curves of the collection, each scored
  (:func:`~rl_core.scaling.fit.adaptive_band.band_scores`) on its points that had arrived by ``f``, i.e. up to the
  largest x that curve's own ``f`` window holds (a curve with no case at ``f`` contributes nothing);
- never the curve's own future; its own past (its earlier forecasts on its own points that had arrived by ``f``)
  only with ``include_own``, as the service scores it (``server/assess/adaptive.py``);
- only at points at least ``options.min_reach`` e-folds past the data of the forecast that made them.

Each source curve weighs 1 in total (spread over its forecasts and points), so ``n`` is the number of other runs that
have residuals. Coverage is summarised as :func:`~.calibration_learn.score` does: informative cases with a power law,
each group the mean of its curves, the collection the mean over groups. Point forecasts are untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.fit.adaptive_band import DEFAULT_OPTIONS, AdaptiveBandOptions, adaptive_scale, band_scores
from rl_core.scaling.fit.adaptive_band import scale_band as _scale_band
from rl_core.scaling.fit.calibration import ForecastCalibration
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.calibration_learn import centre_and_band, learn_calibration
from rl_core.scaling.measure.forecast_cases import ForecastCase


@dataclass(frozen=True)
class AdaptiveBlock:
    """One (collection, cut-off, fitter): the 80% band's coverage as shipped and adaptive."""

    collection: str
    cutoff: float
    fitter: str
    n_groups: int
    coverage_today: float
    coverage_adaptive: float
    median_scale: float
    """Median multiplier over the scored curves (1: no residuals or a band already right)."""
    median_sources: float
    """Median effective number of residuals (other runs, each weighing 1 over all its points, less the points closer
    than ``min_reach``) behind each scored curve's scale."""


def _informative(cases: Sequence[ForecastCase]) -> list[ForecastCase]:
    """The cases the shipped backtest scores: informative curves with a power law."""
    return [c for c in cases if c.power_law is not None and not c.saturated]


def _mean_by_group(cases: Sequence[ForecastCase], values: Sequence[float]) -> float:
    groups: dict[str, list[float]] = {}
    for c, v in zip(cases, values, strict=True):
        groups.setdefault(c.group, []).append(v)
    return float(np.mean([np.mean(v) for v in groups.values()]))


def experiment_residuals(
    cases: Sequence[ForecastCase], cal: ForecastCalibration, cutoff: float, fitter: str, exclude: str
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(scores, weights, reach) the experiment has seen at ``cutoff``: earlier forecasts of every curve but
    ``exclude`` scored on the points that had arrived by ``cutoff`` (reach: e-folds of compute past that forecast's
    data); each source curve's weights sum to 1."""
    seen = {c.curve: c.x_seen for c in cases if abs(c.cutoff - cutoff) < 1e-9}
    per_curve: dict[str, list[tuple[FloatArray, FloatArray]]] = {}
    for c in cases:
        if c.fitter != fitter or c.curve == exclude or c.cutoff >= cutoff - 1e-9 or c.curve not in seen:
            continue
        x, y = np.asarray(c.x), np.asarray(c.y)
        arrived = x <= seen[c.curve]
        if not arrived.any():
            continue
        centre, lo, hi = centre_and_band(c, cal)
        s = band_scores(y[arrived], centre[arrived], lo[arrived], hi[arrived])
        r = np.log(x[arrived] / c.x_seen)
        ok = np.isfinite(s)
        if ok.any():
            per_curve.setdefault(c.curve, []).append((s[ok], r[ok]))
    scores: list[FloatArray] = []
    weights: list[FloatArray] = []
    reach: list[FloatArray] = []
    for parts in per_curve.values():
        s = np.concatenate([p[0] for p in parts])
        scores.append(s)
        reach.append(np.concatenate([p[1] for p in parts]))
        weights.append(np.full(s.size, 1.0 / s.size))
    if not scores:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    return np.concatenate(scores), np.concatenate(weights), np.concatenate(reach)


def score_collection(
    cases: Sequence[ForecastCase],
    cal: ForecastCalibration,
    cutoffs: Sequence[float],
    options: AdaptiveBandOptions = DEFAULT_OPTIONS,
    include_own: bool = False,
) -> list[AdaptiveBlock]:
    """Coverage today and adaptive for one collection's cases (module docstring) at each cut-off and fitter; with
    ``include_own`` a curve's own earlier forecasts count among the residuals too."""
    out = []
    names = sorted({c.collection for c in cases})
    if len(names) != 1:
        raise ValueError("score_collection takes the cases of one collection")
    for fitter in sorted({c.fitter for c in cases}):
        for f in cutoffs:
            targets = [c for c in _informative(cases) if c.fitter == fitter and abs(c.cutoff - f) < 1e-9]
            if not targets:
                continue
            today, adaptive, scales, sources = [], [], [], []
            for c in targets:
                y = np.asarray(c.y)
                centre, lo, hi = centre_and_band(c, cal)
                s, w, r = experiment_residuals(cases, cal, f, fitter, "" if include_own else c.curve)
                k = adaptive_scale(s, w, options, r)
                kept = r >= options.min_reach - 1e-12
                lo2, hi2 = _scale_band(centre, lo, hi, k)
                today.append(float(np.mean((y >= lo) & (y <= hi))))
                adaptive.append(float(np.mean((y >= lo2) & (y <= hi2))))
                scales.append(k)
                sources.append(float(w[kept].sum()))
            out.append(
                AdaptiveBlock(
                    names[0],
                    float(f),
                    fitter,
                    len({c.group for c in targets}),
                    _mean_by_group(targets, today),
                    _mean_by_group(targets, adaptive),
                    float(np.median(scales)),
                    float(np.median(sources)),
                )
            )
    return out


def leave_one_collection_out_adaptive(
    cases: Sequence[ForecastCase],
    cutoffs: Sequence[float] = (0.3, 0.5),
    options: AdaptiveBandOptions = DEFAULT_OPTIONS,
    include_own: bool = False,
) -> list[AdaptiveBlock]:
    """Every collection scored with a calibration learned from the others only, its band today and adaptive."""
    out: list[AdaptiveBlock] = []
    for name in sorted({c.collection for c in cases}):
        cal = learn_calibration([c for c in cases if c.collection != name], f"loco-{name}")
        out.extend(score_collection([c for c in cases if c.collection == name], cal, cutoffs, options, include_own))
    return out
