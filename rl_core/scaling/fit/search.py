"""The search box over the nonlinear parameters (B, log C_mid), shared by the fitters and the posterior."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_core.scaling.fit.linear import LinearFit, solve
from rl_core.scaling.fit.model import B_MAX, B_MIN, FloatArray, fraction_from_log

#: Largest |log C_mid| searched (keeps C_mid finite and positive in float64).
LOG_C_MAX = 700.0
#: C_mid is searched from (smallest positive compute / SPAN) to (largest compute * SPAN).
C_MID_SPAN = 100.0


@dataclass(frozen=True)
class SearchBox:
    """Bounds of the nonlinear parameters: log C_mid in [m_lo, m_hi], B in [b_lo, b_hi]."""

    m_lo: float
    m_hi: float
    b_lo: float = B_MIN
    b_hi: float = B_MAX

    @classmethod
    def for_data(cls, x: FloatArray, c_mid_range: tuple[float, float] | None = None) -> SearchBox:
        """Box around the observed compute range, widened to contain ``c_mid_range`` when given."""
        positive = x[x > 0]
        span = float(np.log(C_MID_SPAN))
        lo = max(float(np.log(positive.min())) - span, -LOG_C_MAX)
        hi = min(float(np.log(positive.max())) + span, LOG_C_MAX)
        if c_mid_range is not None:
            lo = min(lo, float(np.log(c_mid_range[0])))
            hi = max(hi, float(np.log(c_mid_range[1])))
        return cls(m_lo=lo, m_hi=hi)

    def grid(self, n_m: int, n_b: int) -> tuple[FloatArray, FloatArray]:
        """A (n_m x n_b) grid, uniform in log C_mid and in log B; returns flattened (m, B) arrays."""
        m = np.linspace(self.m_lo, self.m_hi, n_m)
        b = np.exp(np.linspace(np.log(self.b_lo), np.log(self.b_hi), n_b))
        mm, bb = np.meshgrid(m, b, indexing="ij")
        return mm.ravel(), bb.ravel()


def log_compute(x: FloatArray) -> FloatArray:
    """log C with log 0 = -inf (for which s = 0)."""
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.maximum(x, 0.0)), dtype=np.float64)


def fractions(log_x: FloatArray, m: FloatArray, b: FloatArray) -> FloatArray:
    """(K, n) matrix of s(C_i) for K cells (m_k, b_k), given log C (see :func:`log_compute`)."""
    return fraction_from_log(log_x[None, :], b[:, None], m[:, None])


#: Resolution of the coarse profile grid over the whole box.
GRID_M = 36
GRID_B = 20


@dataclass(frozen=True)
class Profile:
    """The exact optimum of the linear parameters on every cell of a grid over a :class:`SearchBox`."""

    box: SearchBox
    m: FloatArray
    b: FloatArray
    lin: LinearFit
    shape: tuple[int, int]


def profile(
    x: FloatArray, y: FloatArray, r0: float | None, box: SearchBox, grid_m: int = GRID_M, grid_b: int = GRID_B
) -> Profile:
    """Profile the sigmoid over a (grid_m x grid_b) grid; ``r0`` fixed or ``None`` (fitted)."""
    m, b = box.grid(grid_m, grid_b)
    return Profile(box=box, m=m, b=b, lin=solve(fractions(log_compute(x), m, b), y, r0), shape=(grid_m, grid_b))
