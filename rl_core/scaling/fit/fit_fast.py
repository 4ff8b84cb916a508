"""The default fitter: exact in the linear parameters, global over (B, C_mid) on a grid, refined by bounded
least squares.

1. Profile: for every cell of a (log C_mid, log B) grid the optimal R0/A are solved exactly (:mod:`linear`).
2. Refine: bounded least squares (scipy ``least_squares``, trust-region reflective) on all parameters, started
   from the best grid cells that are local minima of the profile. A descent method from the best cell can only
   lower the residual, so the result is never worse than the grid optimum; because the profile is minimised over
   every A in [0, 1] and a C_mid box that contains the paper's grid, it is never worse than the paper's procedure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.fit.model import A_MAX, A_MIN, FloatArray, SigmoidParams, fraction_from_log
from rl_core.scaling.fit.search import GRID_B, GRID_M, Profile, SearchBox, fractions, log_compute, profile

MAX_STARTS = 3
#: Further local minima are refined only when their grid SSE is below this factor times the best refined SSE.
SKIP_RATIO = 1.0
#: Cap on residual evaluations per refinement: on flat ridges trf creeps for hundreds of steps while the SSE
#: no longer changes at the precision that matters (checked against the paper's grid in tests and bench/).
MAX_NFEV = 50


@dataclass(frozen=True)
class Penalty:
    """A Gaussian prior on (u, lb) = (log C_mid - log_seen, log B) as extra least-squares residuals
    ``weight * R (theta - mean)`` (R^T R the prior precision). With ``weight = sigma / sqrt(tau)`` the penalised SSE
    is the negative log posterior times 2 sigma^2 / tau: its minimum is the posterior mode (MAP)."""

    root: FloatArray
    mean: FloatArray
    log_seen: float
    weight: float

    def residuals(self, m: FloatArray | float, b: FloatArray | float) -> FloatArray:
        d = np.stack([np.asarray(m, dtype=np.float64) - self.log_seen - self.mean[0], np.log(b) - self.mean[1]])
        return np.asarray(self.weight * np.tensordot(self.root, d, axes=1))

    def cost(self, m: FloatArray, b: FloatArray) -> FloatArray:
        r = self.residuals(m, b)
        return np.asarray(np.sum(r * r, axis=0))


@dataclass(frozen=True)
class PointFit:
    """A least-squares sigmoid fit: its parameters and residual sum of squares."""

    params: SigmoidParams
    sse: float


def _local_minima(sse: FloatArray, n_m: int, n_b: int, limit: int) -> list[int]:
    """Indices of grid cells no worse than their 8 neighbours, best first, at most ``limit``."""
    grid = sse.reshape(n_m, n_b)
    padded = np.pad(grid, 1, constant_values=np.inf)
    is_min = np.ones_like(grid, dtype=bool)
    for dm in (-1, 0, 1):
        for db in (-1, 0, 1):
            if dm or db:
                is_min &= grid <= padded[1 + dm : 1 + dm + n_m, 1 + db : 1 + db + n_b]
    idx = np.flatnonzero(is_min.ravel())
    idx = idx[np.argsort(sse[idx])]
    best = int(np.argmin(sse))
    ordered = [best] + [int(i) for i in idx if int(i) != best]
    return ordered[:limit]


_NAMES = ("R0", "A", "B", "m")


def _refine(
    x: FloatArray,
    y: FloatArray,
    start: dict[str, float],
    free: tuple[str, ...],
    box: SearchBox,
    penalty: Penalty | None = None,
) -> tuple[dict[str, float], float]:
    """Bounded least squares over the ``free`` parameters of (R0, A, B, m = log C_mid), the others held at
    ``start``; returns (all parameters, sse). Never returns a point worse than ``start``. With a ``penalty`` the
    objective is SSE + penalty (the returned value too)."""
    log_x = log_compute(x)
    log_x_finite = np.where(x > 0, log_x, 0.0)
    bounds = {"R0": (A_MIN, A_MAX), "A": (A_MIN, A_MAX), "B": (box.b_lo, box.b_hi), "m": (box.m_lo, box.m_hi)}

    def full(t: FloatArray) -> dict[str, float]:
        return {**start, **{k: float(v) for k, v in zip(free, t, strict=True)}}

    def residuals(t: FloatArray) -> FloatArray:
        p = full(t)
        r = p["R0"] + (p["A"] - p["R0"]) * fraction_from_log(log_x, p["B"], p["m"]) - y
        if penalty is not None:
            r = np.concatenate([r, penalty.residuals(p["m"], p["B"])])
        return np.asarray(r)

    def jacobian(t: FloatArray) -> FloatArray:
        p = full(t)
        s = fraction_from_log(log_x, p["B"], p["m"])
        ds = -s * (1.0 - s)  # d s / d(B (m - log x)); exactly 0 where C = 0
        gain = p["A"] - p["R0"]
        cols = {"R0": 1.0 - s, "A": s, "B": gain * ds * (p["m"] - log_x_finite), "m": gain * ds * p["B"]}
        if penalty is not None:
            zero = np.zeros(2)
            extra = {
                "R0": zero,
                "A": zero,
                "B": penalty.weight * penalty.root[:, 1] / p["B"],
                "m": penalty.weight * penalty.root[:, 0],
            }
            cols = {k: np.concatenate([v, extra[k]]) for k, v in cols.items()}
        return np.stack([cols[k] for k in free], axis=1)

    lo = np.array([bounds[k][0] for k in free])
    hi = np.array([bounds[k][1] for k in free])
    t0 = np.clip(np.array([start[k] for k in free]), lo, hi)
    start_sse = float(np.sum(residuals(t0) ** 2))
    try:
        with np.errstate(all="ignore"):
            t, sse = _bounded_lm(residuals, jacobian, t0, lo, hi)
    except (ValueError, np.linalg.LinAlgError):
        return full(t0), start_sse
    if not np.isfinite(sse) or sse > start_sse or not np.all(np.isfinite(t)):
        return full(t0), start_sse
    return full(t), sse


def _bounded_lm(
    residuals: Callable[[FloatArray], FloatArray],
    jacobian: Callable[[FloatArray], FloatArray],
    t0: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    max_iter: int = MAX_NFEV,
) -> tuple[FloatArray, float]:
    """Levenberg-Marquardt with an active set for the box (a variable on a bound whose gradient pushes outward is
    held there) and Marquardt's diagonal scaling. Only accepts steps that lower the cost, so the result is never
    worse than ``t0``. For 3-4 parameters it is ~10x cheaper than scipy's trust-region reflective solver, whose
    per-call overhead dominated the fit (same optimum on the shared curves; checked in tests against the paper)."""
    t = t0.copy()
    r = residuals(t)
    cost = float(r @ r)
    lam = 1e-3
    for _ in range(max_iter):
        J = jacobian(t)
        g = J.T @ r
        H = J.T @ J
        active = ((t <= lo) & (g > 0)) | ((t >= hi) & (g < 0))
        free = ~active
        if not free.any():
            break
        Hf = H[np.ix_(free, free)]
        gf = g[free]
        d = np.maximum(np.diag(Hf), 1e-12 * max(float(np.max(np.diag(Hf))), 1e-300))
        improved = False
        while lam < 1e12:
            step = np.zeros_like(t)
            step[free] = np.linalg.solve(Hf + lam * np.diag(d), -gf)
            t_new = np.clip(t + step, lo, hi)
            r_new = residuals(t_new)
            c_new = float(r_new @ r_new)
            if np.isfinite(c_new) and c_new < cost:
                improved = True
                break
            lam *= 4.0
        if not improved:
            break
        rel = (cost - c_new) / max(cost, 1e-300)
        t, r, cost = t_new, r_new, c_new
        lam = max(lam / 3.0, 1e-9)
        if rel < 1e-10 or cost < 1e-300:
            break
    return t, cost


def _params(p: dict[str, float]) -> SigmoidParams:
    return SigmoidParams(R0=p["R0"], A=p["A"], B=p["B"], C_mid=float(np.exp(p["m"])))


def fit_fast(
    x: FloatArray,
    y: FloatArray,
    r0: float | None,
    box: SearchBox,
    *,
    prof: Profile | None = None,
    max_starts: int = MAX_STARTS,
    penalty: Penalty | None = None,
) -> PointFit:
    """Least-squares sigmoid through (x, y). ``r0`` fixes R0; ``None`` fits it. Assumes cleaned input.

    ``prof`` is the profile of the same data over ``box`` when the caller already has it. With a ``penalty`` (a
    prior on the shape) the result is the posterior mode; its ``sse`` is still the plain residual sum of squares.
    """
    prof = prof if prof is not None else profile(x, y, r0, box)
    m, b, lin = prof.m, prof.b, prof.lin
    objective = lin.sse if penalty is None else lin.sse + penalty.cost(m, b)
    free = ("A", "B", "m") if r0 is not None else _NAMES
    best: tuple[dict[str, float], float] | None = None
    for k in _local_minima(objective, *prof.shape, max_starts):
        if best is not None and objective[k] > SKIP_RATIO * best[1]:
            continue  # a basin this much worse on the grid is not worth a refinement
        start = {"R0": float(lin.R0[k]), "A": float(lin.A[k]), "B": float(b[k]), "m": float(m[k])}
        p, value = _refine(x, y, start, free, box, penalty)
        if best is None or value < best[1]:
            best = (p, value)
    assert best is not None
    params = _params(best[0])
    if penalty is None:
        return PointFit(params, best[1])
    resid = params(x) - y
    return PointFit(params, float(resid @ resid))


def fit_fixed_ceiling(x: FloatArray, y: FloatArray, r0: float | None, ceiling: float, box: SearchBox) -> PointFit:
    """Least-squares sigmoid with A held at ``ceiling`` (the paper's rule for comparing B at equal A)."""
    m, b = box.grid(GRID_M, GRID_B)
    S = fractions(log_compute(x), m, b)
    if r0 is None:  # R0 is the only linear parameter left: R - A s = R0 (1 - s)
        u = 1.0 - S
        r0_cells = np.clip(
            (u @ y - ceiling * np.einsum("kn,kn->k", u, S)) / np.maximum(np.einsum("kn,kn->k", u, u), 1e-300),
            A_MIN,
            A_MAX,
        )
    else:
        r0_cells = np.full(m.size, r0)
    sse = np.sum((r0_cells[:, None] + (ceiling - r0_cells[:, None]) * S - y[None, :]) ** 2, axis=1)
    k = int(np.argmin(sse))
    start = {"R0": float(r0_cells[k]), "A": ceiling, "B": float(b[k]), "m": float(m[k])}
    p, best_sse = _refine(x, y, start, ("B", "m") if r0 is not None else ("R0", "B", "m"), box)
    return PointFit(_params(p), best_sse)
