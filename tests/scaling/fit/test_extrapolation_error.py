"""The extrapolation error of the predictive band: learned from curves, zero inside the data, absent from the curve
draws that grid decisions compare."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.prior import ShapePrior, load_prior
from rl_core.scaling.fit.prior_learn import learn_extrapolation_sd
from tests.scaling.conftest import make_curve


def _drifting_curves(n_curves: int = 8) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Sigmoids that keep creeping past their ceiling at a random rate per e-fold of compute (what real RL curves
    do to a fitted sigmoid), with evaluation noise 0.01."""
    rng = np.random.default_rng(7)
    out = []
    x = np.concatenate([[0.0], np.linspace(25.0, 2000.0, 80)])
    for i in range(n_curves):
        drift = rng.normal(0.0, 0.04)
        y = sigmoid(x, 0.1, 0.6, 2.0, 150.0) + drift * np.log(np.maximum(x, 300.0) / 300.0)
        out.append((f"c{i}", x, np.clip(y + rng.normal(0, 0.01, x.size), 0, 1)))
    return out


def _coverage(curves: list[tuple[str, np.ndarray, np.ndarray]], prior: ShapePrior, cutoff: float) -> float:
    covered = []
    for _, x, y in curves:
        cut = x[0] + cutoff * (x[-1] - x[0])
        fit = fit_curve(x[x <= cut], y[x <= cut], FitOptions(prior=prior))
        preds = fit.predict(x[x > cut])
        covered += [p.lo <= v <= p.hi for p, v in zip(preds, y[x > cut], strict=True)]  # type: ignore[operator]
    return float(np.mean(covered))


def test_learned_error_restores_the_band_on_curves_the_sigmoid_cannot_follow() -> None:
    curves = _drifting_curves()
    base = replace(load_prior(), extrapolation_sd=0.0)
    sd = learn_extrapolation_sd(curves, base, {})
    assert 0.005 < sd < 0.2
    held_out = _drifting_curves(12)[8:]  # curves it did not learn from
    before, after = _coverage(held_out, base, 0.3), _coverage(held_out, replace(base, extrapolation_sd=sd), 0.3)
    assert before < 0.7 and after > before + 0.1


def test_no_error_is_learned_where_the_model_is_exact() -> None:
    curves = [(f"c{i}", *make_curve(n=60, noise=0.01, seed=i)) for i in range(6)]
    assert learn_extrapolation_sd(curves, replace(load_prior(), extrapolation_sd=0.0), {}) < 0.01


def test_error_is_zero_inside_the_data_and_left_out_of_curve_draws() -> None:
    x, y = make_curve(n=40, noise=0.01)
    exact = fit_curve(x[x <= 500], y[x <= 500], FitOptions(prior=replace(load_prior(), extrapolation_sd=0.0)))
    wide = fit_curve(x[x <= 500], y[x <= 500], FitOptions(prior=replace(load_prior(), extrapolation_sd=0.05)))
    assert exact.samples is not None and wide.samples is not None
    assert wide.samples.compute_seen == exact.compute_max
    inside, past = np.array([100.0, 500.0]), np.array([1000.0, 4000.0])
    np.testing.assert_array_equal(wide.samples.curves(past), exact.samples.curves(past))
    np.testing.assert_array_equal(wide.samples.measurements(inside), exact.samples.measurements(inside))
    w_exact = [p.hi - p.lo for p in exact.predict(past)]  # type: ignore[operator]
    w_wide = [p.hi - p.lo for p in wide.predict(past)]  # type: ignore[operator]
    assert w_wide[0] > w_exact[0] and w_wide[1] - w_exact[1] > w_wide[0] - w_exact[0]  # grows with the distance


def test_prior_file_field_round_trips_and_old_files_read_as_exact() -> None:
    prior = load_prior()
    assert prior.extrapolation_sd > 0.0  # the shipped prior carries a learned error
    assert ShapePrior.from_json(prior.to_json()).extrapolation_sd == prior.extrapolation_sd
    old = prior.to_json()
    del old["extrapolation_sd"]
    assert ShapePrior.from_json(old).extrapolation_sd == 0.0
