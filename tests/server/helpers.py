"""Synthetic curves from the paper's sigmoid and small request helpers for the service tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rl_core.scaling import sigmoid

LOO_YAML = """\
name: {name}
leave_one_out: true
seeds: [0]
task: gsm8k
model: Qwen/Qwen2.5-0.5B-Instruct
budget: 16000
"""


def sweep_doc(name: str = "batch-sweep", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "preset": "scalerl",
        "grid": {"batch.prompts": [32, 48]},
        "seeds": [0],
        "task": "gsm8k",
        "model": "tiny",
        "budget": 8000.0,
        **extra,
    }


def curve_points(
    A: float, B: float = 1.8, C_mid: float = 2500.0, R0: float = 0.3, n: int = 30, c_max: float = 8000.0, seed: int = 0
) -> list[dict[str, Any]]:
    """Noisy points of the paper's sigmoid, one per step."""
    rng = np.random.default_rng(seed)
    c = np.linspace(c_max / n, c_max, n)
    y = np.clip(sigmoid(c, R0=R0, A=A, B=B, C_mid=C_mid) + rng.normal(0, 0.004, n), 0, 1)
    return [
        {"step": (i + 1) * 10, "compute": float(ci), "pass_rate": float(yi), "metrics": {"loss": 1.0 / (i + 1)}}
        for i, (ci, yi) in enumerate(zip(c, y, strict=True))
    ]


if TYPE_CHECKING:
    from tests.server.conftest import Service


def post_points(service: Service, run_id: int, points: list[dict[str, Any]]) -> None:
    """POST ``points`` to a run as a trainer would; the answer must be 200."""
    r = service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}, headers=service.write)
    assert r.status_code == 200, r.text


def finish_run(service: Service, run_id: int) -> None:
    """Report the run ``succeeded`` (its budget reached)."""
    r = service.client.post(
        f"/api/v1/runs/{run_id}/status", json={"status": "succeeded", "reason": "budget reached"}, headers=service.write
    )
    assert r.status_code == 200, r.text
