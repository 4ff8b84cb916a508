"""Learning and scoring the forecast calibration (:mod:`rl_core.scaling.fit.calibration`) on forecast cases.

Both parts are learned from :class:`~.forecast_cases.ForecastCase` lists, each collection weighing the same:

- the sigmoid's weights (ceiling identified or not) by a grid search that minimises, over the training collections,
  cut-offs and fitters, the mean log ratio of the forecast's median tail MAE to the best simple baseline (the power
  law or the last value), plus :data:`OVER_PENALTY` times the mean excess of that log ratio over log 1.05 (the goal
  is never more than 5% above the baseline anywhere, not only on average);
- the reach bins' scales as split-conformal quantiles: per held-out point the score is its distance from the centre
  in units of that side's half-width plus the disagreement term; the scale is the weighted ``level`` quantile of the
  scores in the bin (weights: collections equal, groups equal within a collection, points equal within a group).

:func:`score` reproduces what the calibrated forecaster says on a case (the same closed form as
:func:`~rl_core.scaling.fit.calibration.forecast_draws` at the case's level) so that a calibration learned without a
collection can be scored on it: :func:`leave_one_collection_out`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from rl_core.scaling.fit.calibration import RAW, ForecastCalibration
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.forecast_cases import CASE_LEVEL, ForecastCase

#: Weight grid of the sigmoid (0: the power law alone; 1: the sigmoid alone).
WEIGHT_GRID = tuple(float(v) for v in np.linspace(0.0, 1.0, 21))
#: Reach bins, in e-folds of compute past the data (a 0.3 cut-off of a linear axis reaches about 1.2).
REACH_EDGES = (0.0, 0.25, 0.5, 0.75, 1e6)
#: Share of |sigmoid - power law| added to each half-width (chosen among 0, 0.5, 1, 2 on the leave-one-out spread
#: of coverage; docs/forecasting.md).
DISAGREEMENT = 1.0
OVER_PENALTY = 1.0
#: The forecast goal on every collection: tail error at most this multiple of the best simple baseline's.
TOLERANCE = 1.05
#: ... and the 80% band covering this share of the held-out points (the benches count collections inside it).
COVERAGE_GOAL = (0.75, 0.85)
LEARN_CUTOFFS = (0.2, 0.3, 0.4, 0.5, 0.6)


@dataclass(frozen=True)
class Block:
    """One (collection, cut-off, fitter): medians over near-duplicate groups (each group the mean of its curves)."""

    collection: str
    cutoff: float
    fitter: str
    n_groups: int
    mae: dict[str, float]
    """Median tail MAE of ``forecast`` (calibrated centre), ``sigmoid`` (its median alone), ``power_law``, ``last``."""
    coverage: dict[str, float]
    """Share of held-out points inside the 80% band: ``forecast`` (calibrated) and ``sigmoid`` (raw posterior)."""

    @property
    def best_baseline(self) -> float:
        return min(self.mae["power_law"], self.mae["last"])


def usable_cases(cases: Sequence[ForecastCase]) -> list[ForecastCase]:
    """Informative cases with a power law (the comparison needs it): saturating curves are left out as in the
    backtest."""
    return [c for c in cases if c.power_law is not None and not c.saturated]


def centre_and_band(case: ForecastCase, cal: ForecastCalibration) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The calibrated forecaster's value and 80% band at the case's tail points."""
    sig, lo, hi = np.asarray(case.sigmoid), np.asarray(case.lo), np.asarray(case.hi)
    if cal.version == "raw" or case.power_law is None:
        return sig, lo, hi
    pl = np.clip(np.asarray(case.power_law), 0.0, 1.0)
    w = cal.weight_identified if case.identified else cal.weight_unidentified
    centre = w * sig + (1.0 - w) * pl
    spread = cal.disagreement * np.abs(sig - pl)
    k = cal.scale_at(np.log(np.asarray(case.x) / case.x_seen))
    up = np.where(hi - sig > 1e-9, k * (hi - sig + spread), hi - sig)
    down = np.where(sig - lo > 1e-9, k * (sig - lo + spread), sig - lo)
    return centre, np.clip(centre - down, 0.0, 1.0), np.clip(centre + up, 0.0, 1.0)


def _by_group(cases: Sequence[ForecastCase], values: Sequence[float]) -> list[float]:
    """Each near-duplicate group's mean value (a group counts once)."""
    groups: dict[str, list[float]] = {}
    for c, v in zip(cases, values, strict=True):
        groups.setdefault(c.group, []).append(v)
    return [float(np.mean(v)) for v in groups.values()]


def group_median(cases: Sequence[ForecastCase], values: Sequence[float]) -> float:
    return float(np.median(_by_group(cases, values)))


def _group_mean(cases: Sequence[ForecastCase], values: Sequence[float]) -> float:
    return float(np.mean(_by_group(cases, values)))


def score(cases: Sequence[ForecastCase], cal: ForecastCalibration) -> list[Block]:
    """Per (collection, cut-off, fitter): the calibrated forecaster against the raw sigmoid and the baselines."""
    blocks: dict[tuple[str, float, str], list[ForecastCase]] = {}
    for c in usable_cases(cases):
        blocks.setdefault((c.collection, c.cutoff, c.fitter), []).append(c)
    out = []
    for (name, cutoff, fitter), cs in sorted(blocks.items()):
        err: dict[str, list[float]] = {"forecast": [], "sigmoid": [], "power_law": [], "last": []}
        cov: dict[str, list[float]] = {"forecast": [], "sigmoid": []}
        for c in cs:
            y = np.asarray(c.y)
            centre, lo, hi = centre_and_band(c, cal)
            assert c.power_law is not None
            err["forecast"].append(float(np.mean(np.abs(centre - y))))
            err["sigmoid"].append(float(np.mean(np.abs(np.asarray(c.sigmoid) - y))))
            err["power_law"].append(float(np.mean(np.abs(np.asarray(c.power_law) - y))))
            err["last"].append(float(np.mean(np.abs(c.last - y))))
            cov["forecast"].append(float(np.mean((y >= lo) & (y <= hi))))
            cov["sigmoid"].append(float(np.mean((y >= np.asarray(c.lo)) & (y <= np.asarray(c.hi)))))
        out.append(
            Block(
                name,
                cutoff,
                fitter,
                len({c.group for c in cs}),
                {k: group_median(cs, v) for k, v in err.items()},
                {k: _group_mean(cs, v) for k, v in cov.items()},
            )
        )
    return out


@dataclass(frozen=True)
class WeightBlock:
    """One (collection, cut-off, fitter) of usable cases, prepared for a search over the sigmoid's weight:
    ``errors[k, w]`` is case k's tail MAE at :data:`WEIGHT_GRID` [w]; ``group`` maps cases to their near-duplicate
    group, ``size`` counts each group's cases; ``best`` is the block's best simple baseline (power law or last
    value, medians over groups)."""

    cases: list[ForecastCase]
    errors: FloatArray
    group: np.ndarray
    size: np.ndarray
    best: float


def blend_errors(case: ForecastCase) -> FloatArray:
    """The case's tail MAE of ``w * sigmoid + (1 - w) * power law`` at every weight of :data:`WEIGHT_GRID`."""
    grid = np.asarray(WEIGHT_GRID)
    y, sig, pl = np.asarray(case.y), np.asarray(case.sigmoid), np.clip(np.asarray(case.power_law), 0.0, 1.0)
    return np.asarray(np.mean(np.abs(grid[:, None] * sig + (1.0 - grid[:, None]) * pl - y), axis=1))


def weight_blocks(cases: Sequence[ForecastCase]) -> list[WeightBlock]:
    """The usable cases as :class:`WeightBlock` s (each case's errors at every weight computed once)."""
    blocks: dict[tuple[str, float, str], list[ForecastCase]] = {}
    for c in usable_cases(cases):
        blocks.setdefault((c.collection, c.cutoff, c.fitter), []).append(c)
    out = []
    for cs in blocks.values():
        errors = np.array([blend_errors(c) for c in cs])
        names = sorted({c.group for c in cs})
        group = np.array([names.index(c.group) for c in cs])
        best = min(group_median(cs, [float(e) for e in errors[:, 0]]), group_median(cs, [abs_last(c) for c in cs]))
        out.append(WeightBlock(cs, errors, group, np.bincount(group, minlength=len(names)), best))
    return out


def weight_objective(blocks: Sequence[WeightBlock], column: Callable[[WeightBlock], np.ndarray]) -> float:
    """The weights' objective (module docstring) when ``column(block)`` gives each case's index into
    :data:`WEIGHT_GRID`: the mean log ratio of the blocks' median tail MAE to their best baseline, plus
    :data:`OVER_PENALTY` times its mean excess over log :data:`TOLERANCE`."""
    logs = []
    for b in blocks:
        e = b.errors[np.arange(len(b.cases)), column(b)]
        logs.append(np.log(float(np.median(np.bincount(b.group, weights=e) / b.size)) / b.best))
    lr = np.asarray(logs)
    return float(np.mean(lr) + OVER_PENALTY * np.mean(np.maximum(lr - np.log(TOLERANCE), 0.0)))


def learn_weights(cases: Sequence[ForecastCase]) -> tuple[float, float]:
    """(weight when identified, when not) on the weight grid; ties go to the first (smaller) weights."""
    blocks = weight_blocks(cases)
    identified = {id(b): np.array([c.identified for c in b.cases]) for b in blocks}

    def by_ceiling(i: int, j: int) -> Callable[[WeightBlock], np.ndarray]:
        return lambda b: np.where(identified[id(b)], i, j)

    best_pair: tuple[float, tuple[float, float]] | None = None
    for i, wi in enumerate(WEIGHT_GRID):
        for j, wn in enumerate(WEIGHT_GRID):
            value = weight_objective(blocks, by_ceiling(i, j))
            if best_pair is None or value < best_pair[0] - 1e-12:
                best_pair = (value, (wi, wn))
    assert best_pair is not None
    return best_pair[1]


def abs_last(case: ForecastCase) -> float:
    """Tail MAE of the last observed value carried forward."""
    return float(np.mean(np.abs(case.last - np.asarray(case.y))))


def _point_weights(cases: Sequence[ForecastCase]) -> list[float]:
    """Collections equal, groups equal within a collection, points equal within a group (one weight per case,
    to be spread over its points)."""
    by_collection: dict[str, dict[str, int]] = {}
    for c in cases:
        by_collection.setdefault(c.collection, {}).setdefault(c.group, 0)
        by_collection[c.collection][c.group] += len(c.y)
    return [1.0 / len(by_collection[c.collection]) / by_collection[c.collection][c.group] for c in cases]


def learn_scales(
    cases: Sequence[ForecastCase], weights: tuple[float, float], level: float = CASE_LEVEL
) -> tuple[float, ...]:
    """The split-conformal scale per reach bin (module docstring); 1.0 for a bin without points."""
    usable = usable_cases(cases)
    unit = ForecastCalibration("unit", *weights, DISAGREEMENT, REACH_EDGES, (1.0,) * (len(REACH_EDGES) - 1))
    scores: list[FloatArray] = []
    reach: list[FloatArray] = []
    wts: list[FloatArray] = []
    for c, w in zip(usable, _point_weights(usable), strict=True):
        y = np.asarray(c.y)
        centre, lo, hi = centre_and_band(c, unit)
        up, down = np.maximum(hi - centre, 1e-9), np.maximum(centre - lo, 1e-9)
        scores.append(np.where(y >= centre, (y - centre) / up, (centre - y) / down))
        reach.append(np.log(np.asarray(c.x) / c.x_seen))
        wts.append(np.full(y.size, w))
    s, r, wt = np.concatenate(scores), np.concatenate(reach), np.concatenate(wts)
    out = []
    for lo_edge, hi_edge in pairwise(REACH_EDGES):
        m = (r >= lo_edge) & (r < hi_edge)
        if not m.any():
            out.append(1.0)
            continue
        order = np.argsort(s[m])
        cum = np.cumsum(wt[m][order])
        out.append(float(s[m][order][np.searchsorted(cum / cum[-1], level)]))
    return tuple(out)


def learn_calibration(cases: Sequence[ForecastCase], version: str) -> ForecastCalibration:
    """Weights, then scales, from ``cases`` (at :data:`LEARN_CUTOFFS` where present)."""
    train = [c for c in cases if any(abs(c.cutoff - f) < 1e-9 for f in LEARN_CUTOFFS)]
    weights = learn_weights(train)
    return ForecastCalibration(
        version,
        *weights,
        DISAGREEMENT,
        REACH_EDGES,
        learn_scales(train, weights),
        CASE_LEVEL,
        tuple(sorted({c.collection for c in train})),
    )


def leave_one_collection_out(cases: Sequence[ForecastCase]) -> tuple[list[Block], list[Block], dict[str, object]]:
    """(calibrated blocks, raw blocks, calibration per held-out collection): every collection scored with a
    calibration learned from the others only."""
    names = sorted({c.collection for c in cases})
    held: list[Block] = []
    learned: dict[str, object] = {}
    for name in names:
        cal = learn_calibration([c for c in cases if c.collection != name], f"loco-{name}")
        learned[name] = cal.to_json()
        held.extend(score([c for c in cases if c.collection == name], cal))
    return held, score(cases, RAW), learned
