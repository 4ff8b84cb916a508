"""The compute-performance curves of the ScaleRL paper (§1) as plain numpy functions.

Sigmoid:   R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),   C >= 0, R(0) = R0.
Power law: R(C) = A - D / C^B,                             C >= C0 > 0.

Both are evaluated in log-compute space for numerical stability: (C_mid / C)^B = exp(B (log C_mid - log C)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

#: Bounds shared by every fitter so that their results are comparable (the paper's model has B > 0, 0 <= A <= 1).
B_MIN = 0.02
B_MAX = 30.0
A_MIN = 0.0
A_MAX = 1.0


@dataclass(frozen=True)
class SigmoidParams:
    """Parameters of the sigmoid. ``A`` is the ceiling, ``B`` the efficiency exponent, ``C_mid`` the half-gain
    compute, ``R0`` the pass rate at zero RL compute."""

    R0: float
    A: float
    B: float
    C_mid: float

    def __call__(self, compute: ArrayLike) -> FloatArray:
        return sigmoid(compute, self.R0, self.A, self.B, self.C_mid)


@dataclass(frozen=True)
class PowerLawParams:
    """R(C) = A - D / C^B, valid for C >= C0."""

    A: float
    D: float
    B: float
    C0: float

    def __call__(self, compute: ArrayLike) -> FloatArray:
        return power_law(compute, self.A, self.D, self.B)


def sigmoid_fraction(compute: ArrayLike, B: ArrayLike, log_c_mid: ArrayLike) -> FloatArray:
    """s(C) = 1 / (1 + (C_mid/C)^B), the fraction of the gain A - R0 reached at C; broadcasts; s(0) = 0."""
    c = np.asarray(compute, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_c = np.log(np.maximum(c, 0.0))  # log 0 = -inf gives s = 0 below
    return fraction_from_log(log_c, B, log_c_mid)


def fraction_from_log(log_c: ArrayLike, B: ArrayLike, log_c_mid: ArrayLike) -> FloatArray:
    """s as a function of log C: 1/(1+e^z) = (1 - tanh(z/2)) / 2 with z = B (log C_mid - log C), overflow-free."""
    z = np.asarray(B, dtype=np.float64) * (np.asarray(log_c_mid, dtype=np.float64) - np.asarray(log_c))
    return np.asarray(0.5 - 0.5 * np.tanh(0.5 * z), dtype=np.float64)


def sigmoid(compute: ArrayLike, R0: float, A: float, B: float, C_mid: float) -> FloatArray:
    """The paper's sigmoid R(C); vectorised over ``compute``."""
    return R0 + (A - R0) * sigmoid_fraction(compute, B, np.log(C_mid))


def power_law(compute: ArrayLike, A: float, D: float, B: float) -> FloatArray:
    """R(C) = A - D / C^B for C > 0 (non-positive C gives -inf)."""
    c = np.asarray(compute, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out = A - D * np.exp(-B * np.log(np.where(c > 0, c, np.nan)))
    return np.asarray(np.where(c > 0, out, -np.inf), dtype=np.float64)


def compute_for_fraction(fraction: float, B: float, C_mid: float) -> float:
    """Inverse of :func:`sigmoid_fraction`: the compute at which a fraction 0 < f < 1 of the gain is reached."""
    if not 0.0 < fraction < 1.0:
        return float("inf") if fraction >= 1.0 else 0.0
    return float(C_mid * (fraction / (1.0 - fraction)) ** (1.0 / B))
