"""The paper's fitting procedure, kept as the reference the fast fitter is checked against.

For every pair (A, C_mid) of a grid, B is fitted with ``scipy.optimize.curve_fit`` from its default start (B = 1;
R0 too when it is fitted, from the observed start), and the pair with the least sum of squared residuals wins.
The paper's grid is A in {0.450, 0.455, ..., 0.800} and 100 linearly spaced C_mid in [100, 40000] GPU-hours.
Cells whose fitted B leaves the model's domain [B_MIN, B_MAX] (or R0 leaves [0, 1]) are discarded.
This costs thousands of curve_fit calls per fit: it is slow by design.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from rl_core.scaling.fit.fit_fast import PointFit
from rl_core.scaling.fit.model import A_MAX, A_MIN, B_MAX, B_MIN, FloatArray, SigmoidParams, fraction_from_log
from rl_core.scaling.fit.search import log_compute


@dataclass(frozen=True)
class PaperGrid:
    """The (A, C_mid) grid the paper's procedure scans."""

    a_values: FloatArray
    c_mid_values: FloatArray

    @classmethod
    def paper(cls) -> PaperGrid:
        """Exactly the paper's grid (compute in GPU-hours)."""
        return cls(a_values=np.round(np.arange(0.450, 0.8001, 0.005), 3), c_mid_values=np.linspace(100, 40000, 100))

    @classmethod
    def scaled_to(cls, x: FloatArray, y: FloatArray, n_a: int = 71, n_c: int = 100) -> PaperGrid:
        """The paper's grid carried to other units and pass-rate levels.

        The paper fitted ablations up to 8k GPU-hours with C_mid in [100, 40000] = [x_max / 80, 5 x_max] and
        A in [0.45, 0.80] around pass rates near 0.6: here A spans [y_max - 0.15, y_max + 0.20] (inside [0, 1])
        in the paper's 0.005 steps and C_mid spans [x_max / 80, 5 x_max].
        """
        y_max = float(np.max(y)) if y.size else 0.5
        a_lo = max(A_MIN, y_max - 0.15)
        a_hi = min(A_MAX, y_max + 0.20)
        a_values = np.round(np.linspace(a_lo, a_hi, n_a), 4)
        x_max = float(np.max(x)) if x.size else 1.0
        return cls(a_values=a_values, c_mid_values=np.linspace(x_max / 80.0, 5.0 * x_max, n_c))

    @property
    def c_mid_range(self) -> tuple[float, float]:
        return float(self.c_mid_values.min()), float(self.c_mid_values.max())


def fit_paper(x: FloatArray, y: FloatArray, r0: float | None, grid: PaperGrid) -> PointFit | None:
    """The paper's grid fit; ``None`` when no cell produced a valid fit."""
    log_x = log_compute(x)
    r0_start = float(y[np.argmin(x)]) if y.size else 0.0
    best: tuple[float, SigmoidParams] | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        for A in grid.a_values:
            for c_mid in grid.c_mid_values:
                m = float(np.log(c_mid))
                f: Callable[..., FloatArray]
                if r0 is None:

                    def model2(_: FloatArray, R0: float, B: float, A: float = A, m: float = m) -> FloatArray:
                        return R0 + (A - R0) * fraction_from_log(log_x, B, m)

                    f, p0 = model2, [r0_start, 1.0]
                else:

                    def model1(_: FloatArray, B: float, A: float = A, m: float = m, R0: float = r0) -> FloatArray:
                        return R0 + (A - R0) * fraction_from_log(log_x, B, m)

                    f, p0 = model1, [1.0]
                try:
                    popt, _ = curve_fit(f, x, y, p0=p0)
                except (RuntimeError, ValueError):
                    continue
                B = float(popt[-1])
                R0 = float(popt[0]) if r0 is None else r0
                if not (B_MIN <= B <= B_MAX and A_MIN <= R0 <= A_MAX):
                    continue
                sse = float(np.sum((f(x, *popt) - y) ** 2))
                if np.isfinite(sse) and (best is None or sse < best[0]):
                    best = (sse, SigmoidParams(R0=R0, A=float(A), B=B, C_mid=float(c_mid)))
    if best is None:
        return None
    return PointFit(best[1], best[0])
