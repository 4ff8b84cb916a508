"""What the assessment computes once instead of again and again gives exactly what computing it again gave: a fit's
summary (kept by the fit), each run's median value draw (once per decision, not once per comparison) and the
forecast curve and band of a run's page (one summary of the draws at the same computes)."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np

from rl_core.scaling import fit_curve
from rl_core.scaling.decide.grid_run import best_of, medians_of
from rl_core.scaling.fit.calibration import RAW, curve_summary, load_calibration
from rl_core.scaling.fit.forecast import CurveFit, _with
from rl_core.scaling.fit.summary import _summarize, summarize
from server.assess.present import BAND_POINTS, CURVE_POINTS, _curves, _rounded, _series
from server.assess.schemas import Band
from tests.scaling.conftest import make_curve


def _fits() -> list[CurveFit]:
    return [fit_curve(*make_curve(n=30, A=a, seed=k, x_max=600.0)) for k, a in enumerate((0.45, 0.6, 0.8))]


def test_a_summary_is_computed_once_per_fit_and_equals_a_fresh_one() -> None:
    for fit in _fits():
        assert fit.samples is not None
        for width in (0.25, 0.1, None):
            first = summarize(fit, width)
            assert summarize(fit, width) is first
            assert first == _summarize(fit, width)
        scaled = replace(fit, band_scale=2.0)  # a copy of the fields only: summarised again, equally
        assert "_summaries" not in scaled.__dict__ and summarize(scaled) == summarize(fit)
        again = _with(fit, seconds=1.0)  # the fit's own copy helper keeps its fields only (it spread __dict__)
        assert again.seconds == 1.0 and again.params == fit.params and "_summaries" not in again.__dict__
        assert summarize(pickle.loads(pickle.dumps(fit))) == summarize(fit)  # what the fit pool sends back


def test_the_best_run_is_read_from_medians_computed_once() -> None:
    rng = np.random.default_rng(0)
    draws = {i: rng.normal(0.5 + 0.01 * (i % 3), 0.05, 4000) for i in range(12)}
    draws[7] = draws[4].copy()  # a tie: the first of the candidates wins, as before
    medians = medians_of(draws)
    assert medians == {i: float(np.median(v)) for i, v in draws.items()}
    for candidates in (list(draws), [7, 4, 1], [4, 7], [3]):
        assert best_of(candidates, medians) == max(candidates, key=lambda j: float(np.median(draws[j])))


def _curves_as_before(
    fit: CurveFit, compute_min: float, budget: float, value: tuple[float | None, float | None, float | None]
) -> tuple[object, object, object]:
    """``_curves`` as it was, summarising the forecast's draws once for the curve and again for its band."""
    calibration = load_calibration()

    def median_curve(x: np.ndarray, cal: object) -> np.ndarray:
        summary = curve_summary(fit, x, cal)  # type: ignore[arg-type]
        return fit.params(x) if summary is None else summary[0]  # type: ignore[misc]

    x_fit = np.geomspace(compute_min, fit.compute_max, CURVE_POINTS)
    fitted = _series(x_fit, median_curve(x_fit, RAW))
    x_ext = np.geomspace(fit.compute_max, budget, CURVE_POINTS // 2)
    y_ext = median_curve(x_ext, calibration)
    v, v_lo, v_hi = value
    if v is not None:
        y_ext[-1] = v
    extra = _series(x_ext, y_ext)
    summary = curve_summary(fit, np.geomspace(fit.compute_max, budget, BAND_POINTS), calibration)
    assert summary is not None
    _, lo, hi = summary
    if v_lo is not None and v_hi is not None:
        lo[-1], hi[-1] = v_lo, v_hi
    x_band = np.geomspace(fit.compute_max, budget, BAND_POINTS)
    band = Band(x=list(_series(x_band, lo).x), lo=[_rounded(v) for v in lo], hi=[_rounded(v) for v in hi])
    return fitted, extra, band


def test_a_runs_forecast_curve_and_band_are_drawn_as_before() -> None:
    for fit in _fits():
        budget = fit.compute_max * 4
        for value in ((0.61, 0.55, 0.66), (None, None, None)):
            now = _curves(fit, 20.0, budget, value, load_calibration())
            assert now == _curves_as_before(fit, 20.0, budget, value)
