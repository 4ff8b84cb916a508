"""Shared tiny run configs: a random tiny model on 1-digit additions, a few steps, seconds per run."""

from __future__ import annotations

from typing import Any

import pytest


def tiny_config(**overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": "tiny",
        "seed": 0,
        "recipe": {
            "preset": "scalerl",
            "batch": {"prompts": 2, "generations": 2},
            "precision": {"generator_dtype": "float32", "trainer_dtype": "float32"},
            "optimizer": {"lr": 1e-3, "eps": 1e-8},
            "schedule": {"warmup_steps": 0},
            "pipeline": {"mode": "pipeline", "k": 2},
            "filters": {"zero_variance": "none"},
            "length": {"mode": "none", "max_prompt_tokens": 16, "max_response_tokens": 8},
        },
        "model": {"preset": "tiny", "num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64},
        "task": {"kind": "synthetic-addition", "digits_max": 1, "train_size": 20, "validation_size": 4},
        "budget": {"steps": 4},
        "eval": {"every": 2, "k": 1},
        "checkpoint": {"every": 2},
        "generator": {"max_new_tokens": 8},
        "sinks": {"console": False},
    }
    for key, value in overrides.items():
        cur = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = value
    return cfg


@pytest.fixture
def tiny() -> dict[str, Any]:
    return tiny_config()
