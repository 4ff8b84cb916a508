"""Bands that learn from the experiment they are in: the adaptive (online conformal) scale of the
calibrated band (rl_core/scaling/fit/adaptive_band.py) and its leave-one-collection-out backtest."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.scaling.fit.adaptive_band import (
    AdaptiveBandOptions,
    ForecastResidual,
    adaptive_scale,
    band_scores,
    experiment_band_scale,
    scale_band,
    scale_draws,
)
from rl_core.scaling.fit.calibration import ForecastCalibration
from rl_core.scaling.measure.adaptive_backtest import experiment_residuals, score_collection
from rl_core.scaling.measure.forecast_cases import ForecastCase

#: A calibration that leaves a case's band as stored (centre = sigmoid = power law, scale 1, no disagreement term).
UNIT = ForecastCalibration("unit", 0.5, 0.5, 0.0, (0.0, 1e6), (1.0,))
NO_SHRINK = AdaptiveBandOptions(prior_strength=0.0, min_reach=0.0, max_scale=10.0)


def test_no_residuals_leave_the_band_exactly_as_shipped() -> None:
    assert adaptive_scale(np.zeros(0)) == 1.0
    assert adaptive_scale(np.array([np.nan, np.nan])) == 1.0  # degenerate bands score NaN: nothing learned
    # residuals all closer than min_reach to their forecast's data count as none
    assert adaptive_scale(np.array([5.0, 5.0]), reach=np.array([0.1, 0.2])) == 1.0
    centre = np.array([0.3, 0.5, 0.7])
    lo, hi = centre - np.array([0.01, 0.02, 0.03]), centre + np.array([0.02, 0.01, 0.05])
    new_lo, new_hi = scale_band(centre, lo, hi, adaptive_scale(np.zeros(0)))
    assert np.array_equal(new_lo, lo) and np.array_equal(new_hi, hi)
    draws = np.random.default_rng(0).normal(0.5, 0.05, size=(200, 3))
    assert np.array_equal(scale_draws(draws, 1.0), draws)


def test_band_scores_are_distances_in_half_widths_on_each_side() -> None:
    s = band_scores(np.array([0.6, 0.45, 0.5, 0.7]), np.full(4, 0.5), np.full(4, 0.4), np.array([0.6, 0.6, 0.6, 0.5]))
    assert s[:3] == pytest.approx([1.0, 0.5, 0.0])
    assert np.isnan(s[3])  # above the centre with no upper width


def test_residuals_larger_than_the_band_widen_it_and_smaller_narrow_it_within_bounds() -> None:
    opts = AdaptiveBandOptions(prior_strength=5.0)
    many_wide, few_wide = adaptive_scale(np.full(50, 2.0), options=opts), adaptive_scale(np.full(2, 2.0), options=opts)
    assert 1.0 < few_wide < many_wide < 2.0  # shrunk toward the shipped band, less with more residuals
    assert many_wide == pytest.approx(2.0 ** (50 / 55))
    narrow = adaptive_scale(np.full(50, 0.6), options=opts)
    assert 0.6 < narrow < 1.0
    assert adaptive_scale(np.full(1000, 0.01), options=opts) == opts.min_scale
    assert adaptive_scale(np.full(1000, 100.0), options=opts) == opts.max_scale
    # weights are the effective count: 50 points of one run weigh like one residual
    one_run = adaptive_scale(np.full(50, 2.0), np.full(50, 1 / 50), opts)
    assert one_run == pytest.approx(2.0 ** (1 / 6))
    centre, lo, hi = np.array([0.5]), np.array([0.45]), np.array([0.52])
    wide_lo, wide_hi = scale_band(centre, lo, hi, many_wide)
    assert wide_lo[0] < lo[0] and wide_hi[0] > hi[0]
    assert (centre - wide_lo)[0] == pytest.approx(0.05 * many_wide)
    narrow_lo, narrow_hi = scale_band(centre, lo, hi, narrow)
    assert lo[0] < narrow_lo[0] <= centre[0] <= narrow_hi[0] < hi[0]
    draws = np.random.default_rng(1).normal(0.5, 0.02, size=(4000, 1))
    q = np.quantile(scale_draws(draws, 1.5), [0.1, 0.5, 0.9], axis=0)
    q0 = np.quantile(draws, [0.1, 0.5, 0.9], axis=0)
    assert q[1] == pytest.approx(q0[1]) and (q[2] - q[0]) == pytest.approx(1.5 * (q0[2] - q0[0]), rel=1e-6)


def test_the_quantile_targets_the_level() -> None:
    scores = np.linspace(0.0, 2.0, 201)
    k = adaptive_scale(scores, options=AdaptiveBandOptions(prior_strength=0.0, max_scale=10.0))
    assert k == pytest.approx(1.6, abs=0.011)  # 80% of the scores at most 1.6
    assert np.mean(scores <= k) == pytest.approx(0.8, abs=0.01)


def _case(curve: str, cutoff: float, x_seen: float, miss: float, late_miss: float | None = None) -> ForecastCase:
    """A curve on x = 1..10 cut at ``x_seen``: band +-0.01 around 0.5, observed values ``miss`` away (alternating
    sides); from x = 8 on ``late_miss`` away (the future no forecast at cut-off 0.5 may see)."""
    x = [float(v) for v in range(1, 11) if v > x_seen]
    off = [late_miss if late_miss is not None and v >= 8 else miss for v in x]
    y = [0.5 + o * (1 if i % 2 else -1) for i, o in enumerate(off)]
    n = len(x)
    return ForecastCase(
        collection="synthetic",
        curve=curve,
        group=curve,
        saturated=False,
        cutoff=cutoff,
        fitter="fast",
        x_seen=x_seen,
        c_mid=5.0,
        identified=True,
        x=x,
        y=y,
        sigmoid=[0.5] * n,
        point=[0.5] * n,
        lo=[0.49] * n,
        hi=[0.51] * n,
        power_law=[0.5] * n,
        last=0.5,
    )


def test_backtest_learns_from_the_other_curves_only_and_never_from_the_future() -> None:
    # four runs whose bands are 3x too narrow at every point that has arrived by the 0.5 cut-off (x <= 5),
    # and far off afterwards (x >= 8): a band that peeked at the future would blow up
    cases = []
    for j in range(4):
        cases += [_case(f"r{j}", 0.2, 2.0, 0.03, late_miss=0.3), _case(f"r{j}", 0.5, 5.0, 0.025)]
    s, w, r = experiment_residuals(cases, UNIT, 0.5, "fast", exclude="r0")
    assert s.size == 9 and w.sum() == pytest.approx(3.0)  # 3 other runs, their points at x = 3, 4, 5
    assert s == pytest.approx(np.full(9, 3.0)) and r.min() == pytest.approx(np.log(1.5))
    (block,) = score_collection(cases, UNIT, (0.5,), NO_SHRINK)
    assert block.coverage_today == 0.0
    assert block.median_scale == pytest.approx(3.0)
    assert block.coverage_adaptive == 1.0
    assert block.median_sources == pytest.approx(3.0)
    # a band already too wide narrows; shrinkage keeps it nearer the shipped one
    wide = []
    for j in range(4):
        wide += [_case(f"r{j}", 0.2, 2.0, 0.002), _case(f"r{j}", 0.5, 5.0, 0.002)]
    (shrunk,) = score_collection(wide, UNIT, (0.5,), AdaptiveBandOptions(prior_strength=5.0, min_reach=0.0))
    assert AdaptiveBandOptions().min_scale < shrunk.median_scale < 1.0
    assert shrunk.coverage_today == shrunk.coverage_adaptive == 1.0


def test_a_run_alone_keeps_the_shipped_band() -> None:
    cases = [_case("only", 0.2, 2.0, 0.03), _case("only", 0.5, 5.0, 0.03)]
    (block,) = score_collection(cases, UNIT, (0.5,), NO_SHRINK)
    assert block.median_scale == 1.0 and block.coverage_adaptive == block.coverage_today


def _residuals(source: str, score: float, n: int, reach: float = 1.0) -> list[ForecastResidual]:
    """``n`` points of one source, each ``score`` half-widths above a centre of 0.5 with a band of ±0.05."""
    return [ForecastResidual(0.5 + 0.05 * score, 0.5, 0.45, 0.55, reach, source) for _ in range(n)]


def test_experiment_band_scale_from_residuals() -> None:
    assert experiment_band_scale([]) == 1.0
    assert experiment_band_scale(_residuals("a", 3.0, 10, reach=0.1)) == 1.0  # all too close to their data
    opts = AdaptiveBandOptions(prior_strength=5.0)
    wide = experiment_band_scale([r for k in range(20) for r in _residuals(f"run{k}", 2.0, 4)], opts)
    assert wide == pytest.approx(2.0 ** (20 / 25))  # 20 sources, each weighing 1 over its 4 points
    narrow = experiment_band_scale([r for k in range(20) for r in _residuals(f"run{k}", 0.5, 4)], opts)
    assert narrow == pytest.approx(0.5 ** (20 / 25))
    # one source with many points counts as one residual, not as many
    one = experiment_band_scale(_residuals("run0", 2.0, 40), opts)
    assert one == pytest.approx(2.0 ** (1 / 6))
    # the same scale as adaptive_scale on the scores and per-source weights it stands for
    mixed = _residuals("a", 2.0, 3) + _residuals("b", 0.2, 1) + _residuals("c", 1.5, 2, reach=0.1)
    s = np.array([2.0, 2.0, 2.0, 0.2, 1.5, 1.5])
    w = np.array([1 / 3, 1 / 3, 1 / 3, 1.0, 0.5, 0.5])
    reach = np.array([1.0, 1.0, 1.0, 1.0, 0.1, 0.1])
    assert experiment_band_scale(mixed, opts) == pytest.approx(adaptive_scale(s, np.where(reach >= 0.25, w, 0), opts))


def test_with_its_own_past_a_run_alone_learns_from_its_earlier_forecasts_only() -> None:
    """``include_own`` (as the service scores it): the curve's own earlier forecast, on its own points that had
    arrived by the cut-off, counts; its future (x >= 8, missed by far) still never does."""
    cases = [_case("only", 0.2, 2.0, 0.03, late_miss=0.3), _case("only", 0.5, 5.0, 0.025)]
    (alone,) = score_collection(cases, UNIT, (0.5,), NO_SHRINK)
    (own,) = score_collection(cases, UNIT, (0.5,), NO_SHRINK, include_own=True)
    assert alone.median_scale == 1.0
    assert own.median_scale == pytest.approx(3.0) and own.median_sources == pytest.approx(1.0)
    assert own.coverage_adaptive == 1.0 > own.coverage_today
