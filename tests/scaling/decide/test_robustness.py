"""Property tests: the forecaster never raises on numeric input, whatever its shape."""

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rl_core.scaling import compute_to_reach, fit_curve, gain_from_scaling
from rl_core.scaling.decide.recommend import ACTIONS, RunState, recommend_run

STATUSES = {"ok", "insufficient_data", "flat", "decreasing", "error"}
any_float = st.floats(allow_nan=True, allow_infinity=True, width=64)
finite = st.floats(min_value=-1e6, max_value=1e12, allow_nan=False, allow_infinity=False)


@st.composite
def curves(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    n = draw(st.integers(0, 40))
    xs = draw(st.lists(st.one_of(finite, any_float), min_size=n, max_size=n))
    ys = draw(st.lists(st.one_of(st.floats(0, 1), any_float), min_size=n, max_size=n))
    return xs, ys


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(curves(), st.sampled_from(["observed", "fit"]))
def test_fit_never_raises(data: tuple[list[float], list[float]], r0: str) -> None:
    xs, ys = data
    fit = fit_curve(xs, ys, r0=r0, n_samples=200)
    assert fit.status in STATUSES
    assert fit.message
    if fit.params is not None:
        p = fit.params
        assert all(math.isfinite(v) for v in (p.R0, p.A, p.B, p.C_mid))
        assert 0 <= p.A <= 1 and p.B > 0 and p.C_mid > 0
        assert fit.sse is not None and fit.sse >= 0
    # the questions and the recommendation accept whatever came back
    compute_to_reach(fit, 0.5)
    gain_from_scaling(fit, 10.0, 2.0)
    assert recommend_run(RunState("r", fit, 10.0, 100.0)).action in ACTIONS


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=5, max_size=30), st.integers(1, 3))
def test_duplicate_and_unsorted_compute(ys: list[float], repeat: int) -> None:
    xs = list(np.repeat(np.arange(len(ys) // repeat + 1, 0, -1), repeat)[: len(ys)].astype(float))
    fit = fit_curve(xs, ys, n_samples=200)
    assert fit.status in STATUSES
