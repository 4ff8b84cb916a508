"""Shared curve generators for the forecaster tests."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.scaling.fit.model import sigmoid

#: Keys the fit's JSON must carry (the CLI contract of `scalerl fit --json`).
JSON_CONTRACT_KEYS = (
    "status",
    "method",
    "R0",
    "A",
    "B",
    "C_mid",
    "ci",
    "level",
    "n_points",
    "sse",
    "predictions",
    "power_law",
)


def make_curve(
    n: int = 40,
    R0: float = 0.1,
    A: float = 0.6,
    B: float = 1.8,
    C_mid: float = 300.0,
    noise: float = 0.01,
    x_max: float = 1000.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Points of the paper's sigmoid at n computes in (0, x_max] plus Gaussian noise, and R0 at C = 0."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([[0.0], np.linspace(x_max / n, x_max, n)])
    y = sigmoid(x, R0, A, B, C_mid) + rng.normal(0, noise, x.size)
    y[0] = R0
    return x, np.clip(y, 0, 1)


@pytest.fixture
def curve() -> tuple[np.ndarray, np.ndarray]:
    return make_curve()
