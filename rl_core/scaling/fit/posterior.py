"""Calibrated uncertainty: the exact Bayesian posterior of the sigmoid on a grid over (log C_mid, log B).

Model: y_i = R(C_i) + e_i, e_i ~ N(0, sigma^2) independent. Priors: flat on log C_mid and log B inside the search
box, flat on the linear parameters (A, and R0 when fitted) inside [0, 1], and 1/sigma. For fixed (B, C_mid) the
linear parameters and sigma integrate out in closed form:

    p(B, C_mid | y)  ∝  det(G)^(-1/2) · SSE_free^(-(n - p)/2) · P(linear parameters inside the box)

with G the Gram matrix of the linear design, SSE_free the unconstrained residual and p the number of linear
parameters. Given a cell, sigma^2 ~ SSE_free / chi2(n - p) and the linear parameters are Gaussian given sigma
(truncated to the box). Samples of (R0, A, B, C_mid, sigma) give the parameter intervals and the predictive band
of a future measurement (the band includes the measurement noise sigma, since that is what held-out points carry).

Residuals of learning curves are autocorrelated (consecutive evaluations share the model's drift), which makes
n points worth less than n independent ones. The likelihood is therefore tempered to an effective sample size
n_eff = n (1 - rho) / (1 + rho), rho the lag-1 autocorrelation of the least-squares residuals (the AR(1) variance
inflation): the posterior widens by about sqrt(n / n_eff). Chosen by the backtest (docs/forecasting.md).

A grid fit may replace the 1/sigma prior by a scaled inverse chi-square one, :class:`NoisePrior` (``nu0``
pseudo-residuals of variance ``s0^2``, pooled from the run's siblings): SSE_free becomes SSE_free + nu0 s0^2 and
n - p becomes n - p + nu0 in every formula above. A run with a handful of points then borrows its grid's noise level
instead of trusting an exact interpolation (two points and a shared R0 leave no residual at all).

Only the cells that carry mass are refined: a coarse grid over the whole box locates them, and a fine grid over
their bounding box is sampled, each draw jittered uniformly inside its cell. When even the fine grid cannot resolve
the posterior (fewer than MIN_EFFECTIVE_CELLS cells carry its mass: nearly noise-free, well-identified curves),
the draws come from the Laplace approximation at the least-squares fit instead, N(theta_hat, sigma^2 (J^T J)^-1),
which is accurate exactly when the posterior is that narrow.

The model itself is not exact: real curves keep drifting from any fitted sigmoid, more the further a forecast
reaches past the data. :class:`PosteriorSamples` carries that as an *extrapolation error* in the predictive band
(:meth:`PosteriorSamples.measurements`): each draw is shifted by ``extrapolation_sd * z * max(0, ln(C /
compute_seen))``, z ~ N(0, 1) per draw, a random slope in log compute that starts at the last compute the fit saw
(zero inside the data). Its size is learned with the shape prior (:mod:`rl_core.scaling.fit.prior_learn`). The curve
draws (:meth:`PosteriorSamples.curves`) leave it out: on real grids the error is shared by the runs (the sigmoid
under-forecasts nearly all of them, docs/forecasting.md), so it cancels when runs are compared, and adding it
independently per run made the grid decisions slower at no gain in regret (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from rl_core.scaling.fit.linear import LinearFit, solve
from rl_core.scaling.fit.model import A_MAX, A_MIN, FloatArray, SigmoidParams, fraction_from_log
from rl_core.scaling.fit.search import SearchBox, fractions, log_compute

#: log prior density over grid cells, as a function of (log C_mid, B) arrays (see :mod:`rl_core.scaling.fit.prior`).
LogPrior = Callable[[FloatArray, FloatArray], FloatArray]

N_SAMPLES = 2000
FINE_GRID = 32
#: Residuals below this RMS (in pass rate) are rounding error: such a fit is exact and is not tempered.
EXACT_RMS = 1e-6
#: Fewer effective fine-grid cells than this (1 / sum w^2) means the grid cannot resolve the posterior.
MIN_EFFECTIVE_CELLS = 10.0
#: Cells whose log-weight is this far below the best are treated as empty when the fine grid is placed.
LOG_WEIGHT_CUTOFF = 14.0
#: With R0 fitted, a cell whose column 1 - s (or whose design's determinant) is below this relative to n is
#: numerically singular (s is 1 on every point to rounding): R0 is not in the data there, and the cell gets no mass.
SINGULAR_DESIGN = 1e-9
#: Seed of the per-draw extrapolation slopes (fixed: a fit's curves are the same on every call).
EXTRAPOLATION_SEED = 20261124


@dataclass(frozen=True)
class NoisePrior:
    """Scaled inverse chi-square prior on sigma^2: ``dof`` pseudo-residuals of standard deviation ``scale``."""

    scale: float
    dof: float

    def pooled(self, sse: FloatArray | float, dof: FloatArray | float) -> tuple[FloatArray, FloatArray]:
        """(SSE, degrees of freedom) with the prior's pseudo-residuals added."""
        return np.asarray(sse + self.dof * self.scale**2), np.asarray(dof + self.dof)


def pool_noise(
    noise: NoisePrior | None, sse: FloatArray | float, dof: FloatArray | float
) -> tuple[FloatArray, FloatArray]:
    """(SSE, degrees of freedom) of the noise estimate: the data's alone, or with ``noise``'s pseudo-residuals."""
    if noise is None:
        return np.asarray(sse), np.asarray(dof)
    return noise.pooled(sse, dof)


@dataclass(frozen=True)
class PosteriorSamples:
    """Joint draws of the sigmoid's parameters and the noise level; arrays of equal length."""

    R0: FloatArray
    A: FloatArray
    B: FloatArray
    C_mid: FloatArray
    sigma: FloatArray
    extrapolation_sd: float = 0.0
    """Standard deviation of the curve's error per e-fold of compute past ``compute_seen`` (0: the model is exact)."""
    compute_seen: float = 0.0
    """Largest compute the fit saw; the extrapolation error is zero up to it."""

    def curves(self, compute: FloatArray) -> FloatArray:
        """(N, M) noise-free R(C) for every draw at M computes: the model's parameter posterior alone. Comparisons
        between runs of one grid read these (the extrapolation error is shared by a grid's runs, see the module
        docstring)."""
        s = fraction_from_log(log_compute(compute)[None, :], self.B[:, None], np.log(self.C_mid)[:, None])
        return np.asarray(self.R0[:, None] + (self.A - self.R0)[:, None] * s)

    def extrapolation(self, compute: FloatArray) -> FloatArray:
        """(N, M) extrapolation error of every draw: ``extrapolation_sd * z * ln(C / compute_seen)`` past the data,
        z ~ N(0, 1) per draw (a fixed stream), zero up to ``compute_seen``."""
        c = np.asarray(compute, dtype=np.float64)
        if self.extrapolation_sd <= 0.0 or self.compute_seen <= 0.0:
            return np.zeros((self.A.size, c.size))
        efolds = np.log(np.maximum(c, self.compute_seen) / self.compute_seen)
        z = np.random.default_rng(EXTRAPOLATION_SEED).standard_normal(self.A.size)
        return np.asarray(self.extrapolation_sd * z[:, None] * efolds[None, :])

    def measurements(self, compute: FloatArray, seed: int = 1) -> FloatArray:
        """(N, M) draws of a future measured pass rate at each compute: curve + extrapolation error + measurement
        noise, clipped to [0, 1]. This is the predictive band (held-out evaluations are what it must cover)."""
        rng = np.random.default_rng(seed)
        noise = rng.standard_normal((self.sigma.size, compute.size)) * self.sigma[:, None]
        return np.asarray(np.clip(self.curves(compute) + self.extrapolation(compute) + noise, 0.0, 1.0))


def equal_tailed(values: FloatArray, level: float, axis: int = 0) -> tuple[FloatArray, FloatArray]:
    """Central interval holding ``level`` of the draws."""
    lo, hi = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=axis)
    return np.asarray(lo), np.asarray(hi)


def _n_linear(r0: float | None) -> int:
    return 2 if r0 is None else 1


def effective_size(residuals: FloatArray, n_linear: int) -> float:
    """n (1 - rho) / (1 + rho) with rho the lag-1 autocorrelation of ``residuals`` clipped to [0, 0.95]; at least
    ``n_linear + 2`` so that the posterior stays proper; n itself for an exact fit (RMS < EXACT_RMS)."""
    n = residuals.size
    denom = float(residuals @ residuals)
    if n <= 2 or denom <= n * EXACT_RMS**2:
        return float(n)  # an exact fit: residuals are rounding, not noise, and their correlation means nothing
    rho = float(residuals[1:] @ residuals[:-1]) / denom
    rho = min(max(rho, 0.0), 0.95)
    return max(n * (1.0 - rho) / (1.0 + rho), n_linear + 2.0)


def _tempering(n: int, n_eff: float | None) -> float:
    return 1.0 if n_eff is None else min(1.0, n_eff / n)


def log_weights(
    lin: LinearFit, n: int, r0: float | None, n_eff: float | None = None, noise: NoisePrior | None = None
) -> FloatArray:
    """Unnormalised log posterior of each cell (see module docstring); ``n_eff`` tempers the likelihood and
    ``noise`` replaces the 1/sigma prior."""
    p = _n_linear(r0)
    tau = _tempering(n, n_eff)
    sse, dof = pool_noise(noise, np.maximum(lin.sse_free, 1e-300), tau * n - p)
    scale2 = sse / dof / tau  # variance scale of the linear parameters under the tempered likelihood
    if r0 is None:
        det = np.maximum(np.linalg.det(lin.gram), 1e-300)
        # <1-s, 1-s> is computed as n - 2 sum(s) + <s, s>: where s is 1 on every point it is rounding error, and so
        # is the determinant, whose inverse square root was a spurious bonus of up to e^345 (every draw
        # then sat on R0's bound and the median ceiling far below the fit).
        singular = (lin.gram[:, 0, 0] <= SINGULAR_DESIGN * n) | (det <= SINGULAR_DESIGN * np.abs(lin.gram[:, 0, 0]) * n)
        inv = np.linalg.inv(lin.gram + 1e-300 * np.eye(2))
        log_mass = np.zeros_like(sse)
        for j in range(2):
            sd = np.sqrt(np.maximum(scale2 * inv[:, j, j], 1e-300))
            c = lin.theta_free[:, j]
            mass = special.stdtr(dof, (A_MAX - c) / sd) - special.stdtr(dof, (A_MIN - c) / sd)
            log_mass += np.log(np.maximum(mass, 1e-300))
        log_det = np.log(det)
        if not singular.all():  # such a cell is a flat line at the data's mean: never a better explanation
            log_mass = np.where(singular, -np.inf, log_mass)
    else:
        ss = np.maximum(lin.gram[:, 0, 0], 1e-300)
        sd = np.sqrt(scale2 / ss)
        c = lin.theta_free[:, 0]
        mass = special.stdtr(dof, (A_MAX - r0 - c) / sd) - special.stdtr(dof, (A_MIN - r0 - c) / sd)
        log_mass = np.log(np.maximum(mass, 1e-300))
        log_det = np.log(ss)
    return np.asarray(-0.5 * log_det - 0.5 * dof * np.log(sse) + log_mass)


def _fine_box(m: FloatArray, b: FloatArray, logw: FloatArray, box: SearchBox, n_m: int, n_b: int) -> SearchBox:
    """Bounding box of the coarse cells with mass, widened by one coarse cell on each side, inside ``box``."""
    keep = logw >= logw.max() - LOG_WEIGHT_CUTOFF
    dm = (box.m_hi - box.m_lo) / max(n_m - 1, 1)
    dlb = (np.log(box.b_hi) - np.log(box.b_lo)) / max(n_b - 1, 1)
    m_lo = max(box.m_lo, float(m[keep].min()) - dm)
    m_hi = min(box.m_hi, float(m[keep].max()) + dm)
    lb_lo = max(np.log(box.b_lo), float(np.log(b[keep]).min()) - dlb)
    lb_hi = min(np.log(box.b_hi), float(np.log(b[keep]).max()) + dlb)
    return SearchBox(m_lo=m_lo, m_hi=m_hi, b_lo=float(np.exp(lb_lo)), b_hi=float(np.exp(lb_hi)))


def _draw_linear(
    lin: LinearFit, cells: np.ndarray, sigma: FloatArray, r0: float | None, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """Draw (R0, A) given each sample's cell and ``sigma`` (the parameter-scale noise): Gaussian, truncated to the
    box."""
    if r0 is not None:
        ss = np.maximum(lin.gram[cells, 0, 0], 1e-300)
        mean = lin.theta_free[cells, 0]
        sd = np.maximum(sigma / np.sqrt(ss), 1e-300)
        lo = special.ndtr((A_MIN - r0 - mean) / sd)
        hi = special.ndtr((A_MAX - r0 - mean) / sd)
        u = np.clip(lo + rng.random(cells.size) * (hi - lo), 1e-15, 1 - 1e-15)
        a = np.clip(mean + sd * special.ndtri(u), A_MIN - r0, A_MAX - r0)
        return np.full(cells.size, r0), r0 + a
    inv = np.linalg.inv(lin.gram[cells] + 1e-12 * np.eye(2))
    chol = np.linalg.cholesky(inv + 1e-300 * np.eye(2))
    z = rng.standard_normal((cells.size, 2))
    theta = lin.theta_free[cells] + sigma[:, None] * np.einsum("kij,kj->ki", chol, z)
    theta = np.clip(theta, A_MIN, A_MAX)
    return theta[:, 0], theta[:, 1]


def sample_posterior(
    x: FloatArray,
    y: FloatArray,
    r0: float | None,
    box: SearchBox,
    coarse_m: FloatArray,
    coarse_b: FloatArray,
    coarse: LinearFit,
    coarse_shape: tuple[int, int],
    *,
    n_samples: int = N_SAMPLES,
    fine: int = FINE_GRID,
    seed: int = 0,
    n_eff: float | None = None,
    point: SigmoidParams | None = None,
    log_prior: LogPrior | None = None,
    noise: NoisePrior | None = None,
) -> PosteriorSamples:
    """Draw ``n_samples`` from the posterior. ``coarse*`` is the fitter's profile over ``box`` (reused);
    ``n_eff`` is the effective sample size (:func:`effective_size`), ``None`` for independent points; ``point``
    is the least-squares fit, used for the Laplace approximation when the grid is too coarse."""
    rng = np.random.default_rng(seed)
    n = y.size
    tau = _tempering(n, n_eff)
    coarse_logw = log_weights(coarse, n, r0, n_eff, noise)
    if log_prior is not None:
        coarse_logw = coarse_logw + log_prior(coarse_m, coarse_b)
    fbox = _fine_box(coarse_m, coarse_b, coarse_logw, box, *coarse_shape)
    m, b = fbox.grid(fine, fine)
    lin = solve(fractions(log_compute(x), m, b), y, r0)
    logw = log_weights(lin, n, r0, n_eff, noise)
    if log_prior is not None:
        logw = logw + log_prior(m, b)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    if point is not None and 1.0 / float(np.sum(w * w)) < MIN_EFFECTIVE_CELLS:
        return laplace_samples(x, y, r0, point, box, n_samples=n_samples, n_eff=n_eff, rng=rng, noise=noise)
    cells = rng.choice(w.size, size=n_samples, p=w)
    sse, dof = pool_noise(noise, np.maximum(lin.sse_free[cells], 1e-300), tau * n - _n_linear(r0))
    # Noise of one measurement; the linear parameters see it inflated by 1/sqrt(tau).
    sigma = np.sqrt(sse / rng.chisquare(dof, n_samples))
    R0, A = _draw_linear(lin, cells, sigma / np.sqrt(tau), r0, rng)
    half_m = 0.5 * (fbox.m_hi - fbox.m_lo) / max(fine - 1, 1)
    half_lb = 0.5 * (np.log(fbox.b_hi) - np.log(fbox.b_lo)) / max(fine - 1, 1)
    m_draw = np.clip(m[cells] + rng.uniform(-half_m, half_m, n_samples), box.m_lo, box.m_hi)
    lb = np.clip(np.log(b[cells]) + rng.uniform(-half_lb, half_lb, n_samples), np.log(box.b_lo), np.log(box.b_hi))
    return PosteriorSamples(R0=R0, A=A, B=np.exp(lb), C_mid=np.exp(m_draw), sigma=sigma)


def laplace_samples(
    x: FloatArray,
    y: FloatArray,
    r0: float | None,
    point: SigmoidParams,
    box: SearchBox,
    *,
    n_samples: int,
    n_eff: float | None,
    rng: np.random.Generator,
    noise: NoisePrior | None = None,
) -> PosteriorSamples:
    """Draws from N(theta_hat, sigma^2 / tau (J^T J)^-1) at the least-squares fit, clipped to the box."""
    log_x = log_compute(x)
    log_x_finite = np.where(x > 0, log_x, 0.0)
    m = float(np.log(point.C_mid))
    s = fraction_from_log(log_x, point.B, m)
    ds = -s * (1.0 - s)
    gain = point.A - point.R0
    cols = [s, gain * ds * (m - log_x_finite), gain * ds * point.B]  # d/dA, d/dB, d/dm
    theta = [point.A, point.B, m]
    lo = [A_MIN, box.b_lo, box.m_lo]
    hi = [A_MAX, box.b_hi, box.m_hi]
    if r0 is None:
        cols, theta, lo, hi = [1.0 - s, *cols], [point.R0, *theta], [A_MIN, *lo], [A_MAX, *hi]
    J = np.stack(cols, axis=1)
    n, p = y.size, J.shape[1]
    tau = _tempering(n, n_eff)
    resid = point(x) - y
    sse = float(resid @ resid)
    pooled_sse, dof = pool_noise(noise, np.asarray(max(sse, 1e-300)), max(tau * n - p, 1.0))
    sigma = np.sqrt(pooled_sse / rng.chisquare(dof, n_samples))
    vals, vecs = np.linalg.eigh(np.linalg.pinv(J.T @ J))
    root = vecs * np.sqrt(np.maximum(vals, 0.0))
    z = rng.standard_normal((n_samples, p)) @ root.T
    draws = np.clip(np.asarray(theta) + (sigma / np.sqrt(tau))[:, None] * z, lo, hi)
    if r0 is None:
        R0, A, B, m_draw = draws.T
    else:
        R0 = np.full(n_samples, r0)
        A, B, m_draw = draws.T
    return PosteriorSamples(R0=R0, A=A, B=B, C_mid=np.exp(m_draw), sigma=sigma)
