"""The tiny run: a random tiny model on 1-digit additions, a few steps, seconds per run. Plain dicts (no torch
import), shared by the engine tests, the worker's cluster, the CUDA and the vLLM tests."""

from __future__ import annotations

import copy
from typing import Any

#: The recipe keys that keep a run tiny (float32 everywhere, two prompts of two generations, 8 tokens out).
TINY_RECIPE: dict[str, Any] = {
    "batch": {"prompts": 2, "generations": 2},
    "precision": {"generator_dtype": "float32", "trainer_dtype": "float32"},
    "optimizer": {"lr": 1e-3, "eps": 1e-8},
    "schedule": {"warmup_steps": 0},
    "pipeline": {"mode": "pipeline", "k": 2},
    "filters": {"zero_variance": "none"},
    "length": {"mode": "none", "max_prompt_tokens": 16, "max_response_tokens": 8},
}


def tiny_config(**overrides: Any) -> dict[str, Any]:
    """A whole run config for the engine; ``overrides`` are dotted keys (``"budget.steps": 2``)."""
    cfg: dict[str, Any] = {
        "name": "tiny",
        "seed": 0,
        "recipe": {
            "preset": "scalerl",
            **copy.deepcopy(TINY_RECIPE),
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
