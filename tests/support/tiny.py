"""The tiny model the in-process generation and model tests run: the ``tiny`` preset with the character tokenizer,
and small recipes (tests/support/tiny_run.py has the whole run config, without importing torch).

The fixtures here are imported by the conftest of each folder that uses them (a conftest applies to its folder and
below), so a folder opts in: ``one_thread`` is autouse where it is imported."""

from __future__ import annotations

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
