"""The power law R(C) = A - D / C^B (C >= C0), fitted for comparison as in the paper.

For fixed B the model is linear in (A, D); A is kept in [0, 1] and D >= 0 (a rising curve). The profile over
log B is scanned on a grid and refined by bounded least squares
(the fitters' Levenberg-Marquardt). Compute is scaled by its largest value while
fitting (D is reported in the caller's units).
"""

from __future__ import annotations

import numpy as np

from rl_core.scaling.fit.fit_fast import _bounded_lm
from rl_core.scaling.fit.model import A_MAX, A_MIN, FloatArray, PowerLawParams

B_GRID = np.exp(np.linspace(np.log(0.01), np.log(10.0), 60))


def _solve_a_d(t: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per B-grid value, the exact (A, D) under A in [0, 1], D >= 0, and the SSE. ``t`` is (K, n) = C^-B."""
    n = y.size
    st, tt = t.sum(axis=1), np.einsum("kn,kn->k", t, t)
    sy, ty, yy = float(y.sum()), t @ y, float(y @ y)

    def sse(a: FloatArray, d: FloatArray) -> FloatArray:
        # || a - d t - y ||^2
        return np.asarray(n * a * a + d * d * tt + yy - 2 * a * d * st - 2 * a * sy + 2 * d * ty)

    det = n * tt - st * st
    ok = det > 1e-12 * np.maximum(n * tt, 1e-300)
    safe = np.where(ok, det, 1.0)
    a_free = (tt * sy - st * ty) / safe
    d_free = (st * sy - n * ty) / safe  # y = a - d t  => d = -(coefficient of t)
    feasible = ok & (a_free >= A_MIN) & (a_free <= A_MAX) & (d_free >= 0)
    cands_a = [np.where(feasible, a_free, np.nan)]
    cands_d = [np.where(feasible, d_free, np.nan)]
    for a_fix in (A_MIN, A_MAX):  # A on an edge: D = max(0, <t, a - y> / <t, t>)
        cands_a.append(np.full_like(tt, a_fix))
        cands_d.append(np.maximum((a_fix * st - ty) / np.maximum(tt, 1e-300), 0.0))
    cands_a.append(np.clip(np.full_like(tt, sy / n), A_MIN, A_MAX))  # D = 0: constant
    cands_d.append(np.zeros_like(tt))
    a_all, d_all = np.stack(cands_a), np.stack(cands_d)
    s_all = np.where(np.isnan(a_all), np.inf, sse(np.nan_to_num(a_all), np.nan_to_num(d_all)))
    k = np.argmin(s_all, axis=0)
    cols = np.arange(tt.size)
    return a_all[k, cols], d_all[k, cols], np.maximum(s_all[k, cols], 0.0)


def fit_power_law(x: FloatArray, y: FloatArray, c0: float) -> tuple[PowerLawParams, float] | None:
    """Least-squares power law on the points with C >= max(c0, smallest positive C); ``None`` if < 3 points."""
    keep = (x > 0) & (x >= c0)
    xs, ys = x[keep], y[keep]
    if xs.size < 3:
        return None
    scale = float(xs.max())
    log_t = np.log(xs) - np.log(scale)
    with np.errstate(over="ignore", invalid="ignore"):
        # Compute spanning hundreds of decades overflows C^-B for large B: those B are simply not candidates.
        a, d, sse = _solve_a_d(np.exp(-B_GRID[:, None] * log_t[None, :]), ys)
    sse = np.where(np.isfinite(sse), sse, np.inf)
    if not np.isfinite(sse).any():
        return None
    k = int(np.argmin(sse))
    start = np.array([a[k], d[k], B_GRID[k]])

    def residuals(p: FloatArray) -> FloatArray:
        return np.asarray(p[0] - p[1] * np.exp(-p[2] * log_t) - ys)

    def jacobian(p: FloatArray) -> FloatArray:
        tb = np.exp(-p[2] * log_t)
        return np.stack([np.ones_like(tb), -tb, p[1] * tb * log_t], axis=1)

    lo = np.array([A_MIN, 0.0, B_GRID[0]])
    hi = np.array([A_MAX, np.inf, B_GRID[-1]])
    best_p, best_sse = start, float(sse[k])
    try:
        with np.errstate(all="ignore"):
            t, sse_refined = _bounded_lm(residuals, jacobian, np.clip(start, lo, hi), lo, hi, max_iter=100)
        if np.isfinite(sse_refined) and np.all(np.isfinite(t)) and sse_refined < best_sse:
            best_p, best_sse = t, sse_refined
    except (ValueError, np.linalg.LinAlgError):
        pass
    A, D_scaled, B = (float(v) for v in best_p)
    # D_scaled / (C/scale)^B = D_scaled * scale^B / C^B
    with np.errstate(over="ignore"):
        D = D_scaled * float(np.exp(B * np.log(scale)))
    if not np.isfinite(D):
        return None
    return PowerLawParams(A=A, D=D, B=B, C0=float(xs.min())), best_sse
