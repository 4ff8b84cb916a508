import numpy as np

from rl_core.scaling import compare_ceilings, compute_to_reach, fit_curve, gain_from_scaling, value_at
from rl_core.scaling.fit.calibration import curve_summary
from tests.scaling.conftest import make_curve


def test_compute_to_reach_inverts_the_median_curve() -> None:
    """One posterior summary: the median compute to reach 0.5 is where the median curve crosses 0.5 (rising
    curves), and the point fit without draws inverts exactly."""
    x, y = make_curve(noise=0.005)
    fit = fit_curve(x, y)
    reach = compute_to_reach(fit, 0.5)
    assert reach.compute is not None and np.isfinite(reach.compute)
    summary = curve_summary(fit, np.array([reach.compute]))
    assert summary is not None and np.isclose(summary[0][0], 0.5, atol=2e-3)
    point = fit_curve(x, y, intervals=False)
    exact = compute_to_reach(point, 0.5)
    assert exact.compute is not None and np.isclose(value_at(point, exact.compute).mean, 0.5, atol=1e-9)
    assert reach.lo <= reach.compute <= reach.hi
    assert reach.probability == 1.0


def test_unreachable_target() -> None:
    x, y = make_curve(noise=0.005)
    reach = compute_to_reach(fit_curve(x, y), 0.95)
    assert reach.compute == float("inf") and "above the fitted ceiling" in reach.reason


def test_gain_from_scaling() -> None:
    x, y = make_curve(noise=0.005)
    fit = fit_curve(x, y)
    g = gain_from_scaling(fit, 300.0, 2.0)
    assert g is not None
    # the median of the posterior's gains: close to the point fit's on a well-identified curve, inside its interval
    assert np.isclose(g.gain, fit.params(np.array([600.0]))[0] - fit.params(np.array([300.0]))[0], atol=2e-3)
    assert g.lo < g.gain < g.hi
    point = fit_curve(x, y, intervals=False)
    exact = gain_from_scaling(point, 300.0, 2.0)
    assert exact is not None and exact.lo is None
    assert np.isclose(exact.gain, point.params(np.array([600.0]))[0] - point.params(np.array([300.0]))[0])
    assert gain_from_scaling(fit, -1.0, 2.0) is None


def test_compare_ceilings_follows_the_papers_rule() -> None:
    x, y_hi = make_curve(A=0.7, noise=0.005)
    _, y_lo = make_curve(A=0.6, noise=0.005, seed=1)
    higher = compare_ceilings(x, y_hi, x, y_lo)
    assert higher.verdict == "i_higher_ceiling" and higher.difference > 0.02
    # same ceiling, different efficiency: the steeper/earlier curve wins on B at the common A
    _, y_fast = make_curve(A=0.6, B=3.0, C_mid=250, noise=0.002, seed=2)
    _, y_slow = make_curve(A=0.6, B=1.2, C_mid=250, noise=0.002, seed=3)
    eff = compare_ceilings(x, y_fast, x, y_slow)
    assert eff.verdict == "i_more_efficient", eff.reason
    assert eff.common_A is not None and eff.B_i > eff.B_j
