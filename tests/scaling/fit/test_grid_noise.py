"""The grid's noise level as a prior: a sparse run borrows its siblings' noise instead of trusting an exact fit."""

from __future__ import annotations

import numpy as np

from rl_core.scaling import fit_curve, fit_grid
from rl_core.scaling.fit.linear import solve
from rl_core.scaling.fit.posterior import NoisePrior, log_weights
from rl_core.scaling.fit.search import fractions, log_compute

NOISE = 0.02


def _siblings(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 100.0, 21)
    out = []
    for a in (0.8, 0.75, 0.7):
        y = 0.2 + (a - 0.2) * (1 - np.exp(-x / 30)) + rng.normal(0.0, NOISE, x.size)
        y[0] = 0.2
        out.append((x, y))
    return out


SPARSE = (np.array([0.0, 40.0, 80.0]), np.array([0.2, 0.4, 0.45]))


def test_a_two_point_run_is_forecast_with_its_siblings_noise() -> None:
    """Two evaluations and the shared R0 pass exactly through any saturating curve: alone there is no fit, in the
    grid the band is as wide as the siblings' noise says, never zero."""
    assert fit_curve(*SPARSE).status == "insufficient_data"
    fit = fit_grid([*_siblings(), SPARSE])[-1]
    assert fit.status == "ok", fit.message
    assert any("noise level borrowed" in n for n in fit.notes)
    pred = fit.predict(np.array([80.0]))[0]
    assert pred.hi - pred.lo > 2 * 0.5 * NOISE  # the 80% band of a measurement spans at least ~±1 sigma
    assert fit.samples is not None and 0.5 * NOISE < float(np.median(fit.samples.sigma)) < 2.5 * NOISE


def test_long_runs_are_barely_moved_by_the_noise_prior() -> None:
    sib = _siblings()
    alone = [fit_curve(x, y) for x, y in sib]
    joint = fit_grid(sib)
    for a, j in zip(alone, joint, strict=True):
        assert a.params is not None and j.params is not None
        assert abs(a.params.A - j.params.A) < 0.03


def test_the_noise_prior_pools_pseudo_residuals() -> None:
    """An exact interpolation has SSE 0; with the prior its posterior weight is finite and equals the weight of a
    fit whose SSE is the prior's nu0 * s0^2 (the closed form of the module docstring)."""
    x = np.array([0.0, 40.0, 80.0])
    y = np.array([0.2, 0.4, 0.45])
    m = np.array([np.log(30.0)])
    b = np.array([1.0])
    lin = solve(fractions(log_compute(x), m, b), y, 0.2)
    prior = NoisePrior(scale=0.02, dof=4.0)
    with_prior = log_weights(lin, y.size, 0.2, None, prior)
    assert np.all(np.isfinite(with_prior))
    sse, dof = prior.pooled(float(lin.sse_free[0]), 2.0)
    assert float(dof) == 6.0 and float(sse) >= 4.0 * 0.02**2
