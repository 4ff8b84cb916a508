import numpy as np

from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from tests.scaling.conftest import JSON_CONTRACT_KEYS, make_curve


def test_fit_curve_reports_parameters_and_intervals(curve: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = curve
    fit = fit_curve(x, y)
    assert fit.status == "ok"
    assert fit.intervals is not None
    lo, hi = fit.intervals["A"]
    assert lo < 0.6 < hi
    d = fit.to_dict(predict_at=[2000.0])
    for key in JSON_CONTRACT_KEYS:
        assert key in d
    (pred,) = d["predictions"]
    assert pred["lo"] < pred["mean"] < pred["hi"]


def test_burn_in_and_window() -> None:
    x, y = make_curve()
    fit = fit_curve(x, y, burn_in=200.0, fit_until=800.0)
    assert fit.burn_in == 200.0 and fit.compute_max <= 800.0
    assert any("burn-in" in n for n in fit.notes) and any("fit_until" in n for n in fit.notes)
    default = fit_curve(x, y)
    assert np.isclose(default.burn_in, 0.2 * x.max())


def test_explicit_and_observed_r0() -> None:
    x, y = make_curve(R0=0.15)
    assert fit_curve(x, y).params.R0 == y[0]
    assert fit_curve(x, y, r0=0.05).params.R0 == 0.05
    assert fit_curve(x, y, r0="fit").r0_fitted


def test_statuses_for_degenerate_curves() -> None:
    x = np.linspace(1, 100, 20)
    assert fit_curve(x[:3], [0.1, 0.2, 0.3]).status == "insufficient_data"
    assert fit_curve(x, np.full(20, 0.4)).status == "flat"
    falling = fit_curve(x, 0.6 - 0.4 * x / 100)
    assert falling.status == "decreasing" and falling.params is not None
    assert fit_curve(x, x / 100, level=1.5).status == "error"


def test_messy_input_is_cleaned_and_explained() -> None:
    x, y = make_curve(n=20)
    xs = np.concatenate([x[::-1], [np.nan, 5.0, x[3]], [-1.0]])
    ys = np.concatenate([y[::-1], [0.2, np.inf, y[3]], [0.1]])
    fit = fit_curve(xs, ys)
    assert fit.status == "ok"
    text = " ".join(fit.notes)
    for phrase in ("NaN or infinite", "negative compute", "sorted", "duplicate"):
        assert phrase in text


def test_posterior_intervals_are_calibrated_on_model_data() -> None:
    """On curves drawn from the model itself, 80% intervals for A cover the truth about 80% of the time."""
    hits = []
    for seed in range(60):
        rng = np.random.default_rng(seed)
        A = float(rng.uniform(0.4, 0.9))
        x, y = make_curve(
            n=30, A=A, B=float(rng.uniform(1, 3)), C_mid=float(rng.uniform(150, 500)), noise=0.02, seed=seed
        )
        fit = fit_curve(x, y, FitOptions(burn_in=0.0, autocorrelation=False, n_samples=1000))
        lo, hi = fit.intervals["A"]
        hits.append(lo <= A <= hi)
    assert 0.65 <= float(np.mean(hits)) <= 0.95


def test_predictive_band_covers_held_out_points_on_model_data() -> None:
    inside = []
    for seed in range(30):
        x, y = make_curve(n=60, noise=0.02, seed=100 + seed)
        fit = fit_curve(x[:40], y[:40], FitOptions(burn_in=0.0, autocorrelation=False, n_samples=1000))
        band = fit.predict(x[40:])
        inside += [p.lo <= v <= p.hi for p, v in zip(band, y[40:], strict=True)]
    assert 0.7 <= float(np.mean(inside)) <= 0.9


def test_paper_method_runs_and_is_not_better_than_fast() -> None:
    from rl_core.scaling.fit.fit_paper import PaperGrid

    x, y = make_curve(n=15)
    grid = PaperGrid.scaled_to(x, y, n_a=10, n_c=10)
    paper = fit_curve(x, y, method="paper", paper_grid=grid, intervals=False)
    fast = fit_curve(x, y, intervals=False)
    assert paper.method == "paper" and paper.status == "ok"
    assert fast.sse <= paper.sse * (1 + 1e-9)


def test_unidentified_ceiling_is_said_in_the_message() -> None:
    """Early, nearly straight data: the least-squares ceiling leaves the posterior interval, and the message says
    so; a well-identified curve gets no such remark."""
    x, y = make_curve(C_mid=5000, B=1.0, noise=0.01, x_max=300)
    fit = fit_curve(x, y, prior=None)  # the least-squares point against the flat-prior posterior
    lo, hi = fit.intervals["A"]
    assert not lo <= fit.params.A <= hi
    assert "ceiling not identified yet" in fit.message
    x, y = make_curve()
    assert "not identified" not in fit_curve(x, y).message


def test_point_fit_lies_inside_its_intervals_down_to_noise_free_data() -> None:
    """Narrow posteriors (tiny noise) are resolved by the Laplace fallback: the interval contains the fit."""
    for noise in (0.0, 1e-4, 1e-3, 1e-2):
        for r0 in ("observed", "fit"):
            x, y = make_curve(n=30, A=0.65, noise=noise, seed=3)
            fit = fit_curve(x, y, r0=r0)
            for name in ("A", "B", "C_mid"):
                lo, hi = fit.intervals[name]
                value = getattr(fit.params, name)
                assert lo - 1e-9 * abs(value) <= value <= hi + 1e-9 * abs(value), (noise, r0, name, lo, value, hi)
            assert fit.intervals["A"][1] - fit.intervals["A"][0] < 0.2
