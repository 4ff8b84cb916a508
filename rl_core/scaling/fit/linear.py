"""Exact solutions for the parameters in which the sigmoid is linear.

For fixed (B, C_mid) the sigmoid R = R0 (1 - s) + A s is linear in A (and in R0 when R0 is fitted), so the
least-squares optimum of those parameters under the box 0 <= R0, A <= 1 has a closed form. Everything here is
vectorised over K candidate (B, C_mid) cells: ``S`` has shape (K, n) and holds s(C_i) for each cell.

Box-constrained convex quadratics in one or two variables are solved exactly: the optimum is the unconstrained
one if feasible, otherwise it lies on an edge of the box, where the problem is one-dimensional and clipping is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_core.scaling.fit.model import A_MAX, A_MIN, FloatArray

_TINY = 1e-300


@dataclass(frozen=True)
class LinearFit:
    """Per-cell optimum: constrained (``R0``, ``A``, ``sse``) and the unconstrained quantities the posterior uses."""

    R0: FloatArray
    A: FloatArray
    sse: FloatArray
    sse_free: FloatArray
    """Residual sum of squares at the unconstrained optimum (<= ``sse``)."""
    theta_free: FloatArray
    """(K, p) unconstrained optimum: p=1 holds A - R0 (R0 fixed); p=2 holds (R0, A)."""
    gram: FloatArray
    """(K, p, p) Gram matrix of the linear design."""


def solve_fixed_r0(S: FloatArray, y: FloatArray, r0: float) -> LinearFit:
    """Optimal A for each cell with R0 fixed: a = A - R0 = <s, y - R0> / <s, s>, clipped to the box."""
    z = y - r0
    sz = S @ z
    ss = np.einsum("kn,kn->k", S, S)
    zz = float(z @ z)
    safe = ss > _TINY
    a_free = np.where(safe, sz / np.where(safe, ss, 1.0), 0.0)
    a = np.clip(a_free, A_MIN - r0, A_MAX - r0)
    sse = np.maximum(zz - 2.0 * a * sz + a * a * ss, 0.0)
    sse_free = np.maximum(zz - a_free * sz, 0.0)
    return LinearFit(
        R0=np.full_like(a, r0),
        A=r0 + a,
        sse=sse,
        sse_free=sse_free,
        theta_free=a_free[:, None],
        gram=ss[:, None, None],
    )


def solve_fitted_r0(S: FloatArray, y: FloatArray) -> LinearFit:
    """Optimal (R0, A) for each cell with both in [A_MIN, A_MAX] (design columns 1 - s and s)."""
    n = y.size
    s_sum = S.sum(axis=1)
    ss = np.einsum("kn,kn->k", S, S)
    p = n - 2.0 * s_sum + ss  # <1-s, 1-s>
    q = s_sum - ss  # <1-s, s>
    sy = S @ y
    r1 = float(y.sum()) - sy  # <1-s, y>
    r2 = sy  # <s, y>
    yy = float(y @ y)

    def sse_of(t1: FloatArray, t2: FloatArray) -> FloatArray:
        return np.asarray(yy - 2.0 * (t1 * r1 + t2 * r2) + t1 * t1 * p + 2.0 * t1 * t2 * q + t2 * t2 * ss)

    det = p * ss - q * q
    ok = np.abs(det) > 1e-12 * np.maximum(p * ss, _TINY)
    safe_det = np.where(ok, det, 1.0)
    t1_free = np.where(ok, (ss * r1 - q * r2) / safe_det, np.clip(r1 / np.maximum(p, _TINY), A_MIN, A_MAX))
    t2_free = np.where(ok, (p * r2 - q * r1) / safe_det, t1_free)
    sse_free = np.maximum(sse_of(t1_free, t2_free), 0.0)

    feasible = ok & (t1_free >= A_MIN) & (t1_free <= A_MAX) & (t2_free >= A_MIN) & (t2_free <= A_MAX)
    cand_t1 = [np.where(feasible, t1_free, np.nan)]
    cand_t2 = [np.where(feasible, t2_free, np.nan)]
    for v in (A_MIN, A_MAX):
        # R0 = v on the edge: optimal A is a clipped 1-D solve, and vice versa.
        cand_t1.append(np.full_like(ss, v))
        cand_t2.append(np.clip((r2 - q * v) / np.maximum(ss, _TINY), A_MIN, A_MAX))
        cand_t2.append(np.full_like(ss, v))
        cand_t1.append(np.clip((r1 - q * v) / np.maximum(p, _TINY), A_MIN, A_MAX))
    t1 = np.stack(cand_t1)
    t2 = np.stack(cand_t2)
    sse_all = np.where(np.isnan(t1), np.inf, sse_of(np.nan_to_num(t1), np.nan_to_num(t2)))
    best = np.argmin(sse_all, axis=0)
    cols = np.arange(ss.size)
    gram = np.stack([np.stack([p, q], axis=-1), np.stack([q, ss], axis=-1)], axis=-2)
    return LinearFit(
        R0=t1[best, cols],
        A=t2[best, cols],
        sse=np.maximum(sse_all[best, cols], 0.0),
        sse_free=sse_free,
        theta_free=np.stack([t1_free, t2_free], axis=-1),
        gram=gram,
    )


def solve(S: FloatArray, y: FloatArray, r0: float | None) -> LinearFit:
    """Dispatch: ``r0`` fixed (a float) or fitted (``None``)."""
    return solve_fitted_r0(S, y) if r0 is None else solve_fixed_r0(S, y, r0)
