"""Shared curve and grid generators for the scaling tests."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.scaling import GridRun
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


def random_curve(
    seed: int, *, B: tuple[float, float], C_mid: tuple[float, float], noise: tuple[float, float], n: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``make_curve`` with its shape drawn from ``seed``: A in [0.3, 0.95], B, C_mid and noise uniform in their
    ranges, and (``n=True``) 8 to 39 points, drawn first."""
    rng = np.random.default_rng(seed)
    points = {"n": int(rng.integers(8, 40))} if n else {}
    return make_curve(
        **points,
        A=float(rng.uniform(0.3, 0.95)),
        B=float(rng.uniform(*B)),
        C_mid=float(rng.uniform(*C_mid)),
        noise=float(rng.uniform(*noise)),
        seed=seed,
    )


def six_recipe_grid(n_points: int) -> list[GridRun]:
    """Six live recipes at levels 0.80 to 0.54 (0.2 at x = 0, seeded noise 0.005), evaluated every 10 for
    ``n_points`` evaluations, each with a budget of 270 (the 1/9 rung is at x = 30)."""
    rng = np.random.default_rng(0)
    x = np.arange(n_points, dtype=np.float64) * 10.0
    out = []
    for k, level in enumerate((0.80, 0.78, 0.60, 0.58, 0.56, 0.54)):
        y = np.clip(np.full(x.size, level) + rng.normal(0.0, 0.005, x.size), 0, 1)
        y[0] = 0.2
        out.append(GridRun(f"run{k}", x, y, "live", 270.0))
    return out


@pytest.fixture
def curve() -> tuple[np.ndarray, np.ndarray]:
    return make_curve()
