"""The closed-form solutions for the linear parameters agree with a generic bounded least-squares solver."""

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from rl_core.scaling.fit.linear import solve_fitted_r0, solve_fixed_r0


@pytest.mark.parametrize("seed", range(8))
def test_fixed_r0_matches_bounded_lstsq(seed: int) -> None:
    rng = np.random.default_rng(seed)
    S = rng.uniform(0, 1, (5, 12))
    y = rng.uniform(0, 1, 12) * rng.uniform(0.2, 2.0)
    r0 = float(rng.uniform(0, 0.5))
    lin = solve_fixed_r0(S, y, r0)
    for k in range(5):
        ref = lsq_linear(S[k][:, None], y - r0, bounds=(-r0, 1 - r0))
        assert np.isclose(lin.A[k], r0 + ref.x[0], atol=1e-7)
        assert np.isclose(lin.sse[k], 2 * ref.cost, atol=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_fitted_r0_matches_bounded_lstsq(seed: int) -> None:
    rng = np.random.default_rng(seed)
    S = rng.uniform(0, 1, (6, 15))
    y = rng.normal(0.5, 0.6, 15)  # often infeasible unconstrained: exercises the box edges
    lin = solve_fitted_r0(S, y)
    for k in range(6):
        design = np.stack([1 - S[k], S[k]], axis=1)
        ref = lsq_linear(design, y, bounds=(0.0, 1.0))
        assert np.isclose(lin.sse[k], 2 * ref.cost, atol=1e-8)
        assert np.allclose([lin.R0[k], lin.A[k]], ref.x, atol=1e-5)
