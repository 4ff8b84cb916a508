"""The tiny model every in-process engine test runs: the ``tiny`` preset with the character tokenizer, small
recipes and small run configs (a random model on 1-digit additions, a few steps, seconds per run).

The fixtures here are imported by the conftest of each folder that uses them (a conftest applies to its folder and
below), so a folder opts in: ``one_thread`` is autouse where it is imported."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe import Recipe, apply_overrides

TINY = ModelConfig(preset="tiny", hidden_size=32, intermediate_size=64)


@pytest.fixture(autouse=True)
def one_thread() -> None:
    """One torch thread per test: the machines that run these have two cores shared by two pytest workers."""
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerBase:
    return build_tokenizer(TINY)


@pytest.fixture
def model(tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    return build_model(TINY, tokenizer, fp32_lm_head=True)


def small_recipe(**overrides: object) -> Recipe:
    """Interruption with small budgets (the phrase is ~80 characters = tokens here)."""
    base: dict[str, object] = {
        "length.mode": "interruption",
        "length.max_response_tokens": 48,
        "length.interruption.budget_min": 6,
        "length.interruption.budget_max": 10,
        "length.interruption.answer_budget": 8,
        "precision.generator_dtype": "float32",
    }
    base.update(overrides)
    return apply_overrides(Recipe(), base)


def tiny_config(**overrides: Any) -> dict[str, Any]:
    """A whole run config for the engine; ``overrides`` are dotted keys (``"budget.steps": 2``)."""
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
