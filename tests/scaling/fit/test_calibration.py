"""The calibrated forecast (a sigmoid blended with a power law early, a band scaled by what real curves
did), how it is learned (split-conformal scales, weights by grid search) and how the backtest reads it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rl_core.scaling import fit_curve
from rl_core.scaling.fit.calibration import (
    CALIBRATION_FILE,
    RAW,
    ForecastCalibration,
    curve_summary,
    forecast_draws,
    forecast_summary,
    load_calibration,
    sigmoid_weight,
)
from rl_core.scaling.fit.summary import summarize
from rl_core.scaling.measure.calibration_learn import (
    REACH_EDGES,
    centre_and_band,
    learn_scales,
    learn_weights,
    score,
)
from rl_core.scaling.measure.forecast_cases import ForecastCase
from scalerl.cli.main import cli as cli_main
from tests.scaling.conftest import make_curve

FLAT = ForecastCalibration("flat-2x", 0.3, 0.3, 0.0, (0.0, 1e6), (2.0,))


def _fit_early(seed: int = 0, cut: int = 12):
    x, y = make_curve(n=40, A=0.7, B=1.5, C_mid=800.0, noise=0.01, seed=seed)
    return fit_curve(x[:cut], y[:cut]), x


def test_the_shipped_calibration_loads_and_is_valid() -> None:
    cal = load_calibration()
    assert cal.version != "raw" and len(cal.scale) == len(cal.reach_edges) - 1
    assert 0.0 <= cal.weight_unidentified <= cal.weight_identified <= 1.0
    assert ForecastCalibration.from_json(json.loads(CALIBRATION_FILE.read_text())) == cal
    assert ForecastCalibration.from_json(cal.to_json()) == cal


@pytest.mark.parametrize(
    "change",
    [{"scale": (1.0, 1.0)}, {"scale": (-1.0,)}, {"weight_identified": 1.5}],
)
def test_an_invalid_calibration_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        replace(FLAT, **change)  # type: ignore[arg-type]


def test_raw_reads_the_posterior_as_it_is() -> None:
    fit, x = _fit_early()
    at = np.array([x[20], x[-1]])
    assert fit.samples is not None
    np.testing.assert_array_equal(forecast_draws(fit, at, "curve", RAW), fit.samples.curves(at))  # type: ignore[arg-type]
    np.testing.assert_array_equal(forecast_draws(fit, at, "measurement", RAW), fit.samples.measurements(at))  # type: ignore[arg-type]


def test_the_centre_blends_the_sigmoid_median_with_the_power_law() -> None:
    fit, x = _fit_early()
    at = np.array([x[25], x[-1]])
    assert fit.power_law is not None and fit.samples is not None
    value, lo, hi = forecast_summary(fit, at, "curve", calibration=FLAT)  # type: ignore[misc]
    med = np.median(fit.samples.curves(at), axis=0)
    pl = np.clip(fit.power_law(at), 0.0, 1.0)
    if summarize(fit, None).ceiling_identified:
        pl = np.minimum(pl, np.median(fit.samples.A))
    np.testing.assert_allclose(value, 0.3 * med + 0.7 * pl, atol=2e-3)
    assert np.all(lo <= value) and np.all(value <= hi)
    # the band: twice the posterior's own half-width on each side (disagreement 0), around the new centre
    raw_lo, raw_hi = np.quantile(fit.samples.curves(at), [0.1, 0.9], axis=0)
    np.testing.assert_allclose(hi - value, np.minimum(2.0 * (raw_hi - med), 1.0 - value), atol=3e-3)
    np.testing.assert_allclose(value - lo, np.minimum(2.0 * (med - raw_lo), value), atol=3e-3)


def test_the_disagreement_widens_the_band_and_reach_bins_pick_their_scale() -> None:
    fit, x = _fit_early()
    at = np.array([x[-1]])
    narrow = forecast_summary(fit, at, "curve", calibration=replace(FLAT, scale=(1.0,)))
    wide = forecast_summary(fit, at, "curve", calibration=replace(FLAT, scale=(1.0,), disagreement=1.0))
    assert narrow is not None and wide is not None
    assert wide[2][0] - wide[1][0] > narrow[2][0] - narrow[1][0]
    binned = replace(FLAT, reach_edges=(0.0, 0.5, 1e6), scale=(1.0, 3.0))
    reach = np.log(x[-1] / fit.compute_max)
    assert reach > 0.5
    np.testing.assert_allclose(binned.scale_at(np.array([0.1, reach])), [1.0, 3.0])


def test_an_identified_ceiling_bounds_the_blended_forecast() -> None:
    x, y = make_curve(n=60, A=0.6, B=2.0, C_mid=300.0, noise=0.005, seed=3)
    fit = fit_curve(x[:40], y[:40])
    assert summarize(fit, None).ceiling_identified
    value = curve_summary(fit, np.array([x[-1] * 50]))
    assert value is not None
    assert value[0][0] <= float(summarize(fit).value("A")) + 1e-6  # type: ignore[arg-type]


def test_weights_follow_whether_the_ceiling_is_identified() -> None:
    fit, _ = _fit_early()
    cal = replace(FLAT, weight_identified=0.8, weight_unidentified=0.2)
    expected = 0.8 if summarize(fit, None).ceiling_identified else 0.2  # the blend reads the bound rule alone
    assert sigmoid_weight(fit, cal) == expected
    assert sigmoid_weight(fit, RAW) == 1.0
    assert sigmoid_weight(replace(fit, power_law=None), cal) == 1.0


def _case(rng: np.random.Generator, collection: str, i: int, bias: float, sd: float, hw: float) -> ForecastCase:
    """A synthetic case: the truth is the power law; the sigmoid misses it by ``bias``; its band is ``hw`` wide."""
    x = np.linspace(2.0, 5.0, 12)
    truth = 0.5 + 0.02 * np.log(x)
    y = truth + rng.normal(0.0, sd, x.size)
    sig = truth + bias
    return ForecastCase(
        collection,
        f"{collection}/c{i}",
        f"{collection}/c{i}",
        False,
        0.3,
        "fast",
        1.0,
        3.0,
        i % 2 == 0,
        list(x),
        list(y),
        list(sig),
        list(sig),
        list(sig - hw),
        list(sig + hw),
        list(truth),
        float(y[0]),
    )


def test_learned_weights_prefer_the_forecaster_that_was_right() -> None:
    rng = np.random.default_rng(0)
    cases = [_case(rng, f"c{k}", i, bias=0.05, sd=0.005, hw=0.01) for k in range(3) for i in range(8)]
    wi, wn = learn_weights(cases)
    assert wi <= 0.1 and wn <= 0.1  # the power law was the truth


def test_split_conformal_scales_cover_fresh_data_at_the_level() -> None:
    rng = np.random.default_rng(1)
    sd, hw = 0.02, 0.01  # the raw band is far too narrow: 0.01 against a 1.28 sd = 0.026 half-width
    train = [_case(rng, f"t{k}", i, bias=0.0, sd=sd, hw=hw) for k in range(3) for i in range(30)]
    scales = learn_scales(train, (1.0, 1.0))
    assert len(scales) == len(REACH_EDGES) - 1
    cal = ForecastCalibration("t", 1.0, 1.0, 1.0, REACH_EDGES, scales)
    fresh = [_case(rng, "fresh", i, bias=0.0, sd=sd, hw=hw) for i in range(60)]
    block = score(fresh, cal)[0]
    assert block.coverage["sigmoid"] < 0.5
    assert 0.72 <= block.coverage["forecast"] <= 0.88
    centre, lo, hi = centre_and_band(fresh[0], cal)
    assert np.all(lo <= centre) and np.all(centre <= hi)


def test_backtest_cli_reads_the_calibration_option(tmp_path: Path) -> None:
    for k in range(3):
        x, y = make_curve(n=40, A=0.6 + 0.05 * k, noise=0.01, seed=k)
        (tmp_path / f"run{k}.csv").write_text(
            "step,pass_rate\n" + "\n".join(f"{a},{b}" for a, b in zip(x, y, strict=True))
        )
    runner = CliRunner()
    out = runner.invoke(cli_main, ["backtest", str(tmp_path), "--methods", "fast,last_value", "--prior", "none"])
    assert out.exit_code == 0, out.output
    assert f"calibration: {load_calibration().version}" in out.output
    raw = runner.invoke(
        cli_main, ["backtest", str(tmp_path), "--methods", "fast", "--prior", "none", "--calibration", "raw"]
    )
    assert raw.exit_code == 0 and "calibration: raw" in raw.output
    bad = runner.invoke(cli_main, ["backtest", str(tmp_path), "--calibration", str(tmp_path / "nope.json")])
    assert bad.exit_code == 2
    assert "--calibration" in bad.output and "Traceback" not in bad.output
