import numpy as np

from rl_core.scaling.fit.model import compute_for_fraction, power_law, sigmoid, sigmoid_fraction


def test_sigmoid_closed_form_values() -> None:
    # R(0) = R0, R(C_mid) = (R0 + A)/2, R(inf) -> A; and the formula itself at C = 2 C_mid.
    assert sigmoid([0.0], 0.1, 0.6, 2.0, 100.0)[0] == 0.1
    assert np.isclose(sigmoid([100.0], 0.1, 0.6, 2.0, 100.0)[0], 0.35)
    assert np.isclose(sigmoid([1e12], 0.1, 0.6, 2.0, 100.0)[0], 0.6)
    assert np.isclose(sigmoid([200.0], 0.1, 0.6, 2.0, 100.0)[0], 0.1 + 0.5 / (1 + 0.25))


def test_fraction_is_overflow_free_at_extremes() -> None:
    s = sigmoid_fraction([0.0, 1e-300, 1.0, 1e300], 30.0, np.log(1e5))
    assert np.all(np.isfinite(s))
    assert s[0] == 0.0 and s[-1] == 1.0


def test_power_law_and_inverse() -> None:
    assert np.isclose(power_law([4.0], 0.8, 0.4, 0.5)[0], 0.8 - 0.4 / 2)
    c = compute_for_fraction(0.8, 2.0, 100.0)
    assert np.isclose(sigmoid_fraction([c], 2.0, np.log(100.0))[0], 0.8)
