"""Fixtures of the vLLM backend tests: a tiny Qwen2 (head_dim 32, which vLLM's CPU attention needs), recipes.

The tests run in ``.venv-vllm`` (``make test-vllm``); in ``.venv`` (no vLLM) every module skips.
"""

from __future__ import annotations

import os

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl_core.algorithms.fp32_head import token_logprobs
from rl_core.generation import Rollout
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe import Recipe, apply_overrides
from rl_core.tasks import Problem
from tests.support.tiny import one_thread

__all__ = ["one_thread"]  # autouse: one torch thread per test

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

#: tiny preset as Qwen2 with 2 heads: hidden 64 / 2 = head_dim 32
QWEN = ModelConfig(preset="tiny", arch="qwen2", num_attention_heads=2, num_key_value_heads=1)
PROBLEMS = [Problem("a", "1+2=", "3"), Problem("b", "123+4567=", "4690"), Problem("c", "sort:9=", "9")]
PHRASE = "Time is up.</think>"


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerBase:
    return build_tokenizer(QWEN)


def make_model(tokenizer: PreTrainedTokenizerBase, dtype: str = "float32", **shape: object) -> PreTrainedModel:
    cfg = QWEN.model_copy(update=shape) if shape else QWEN
    return build_model(cfg, tokenizer, dtype=dtype, fp32_lm_head=True)  # type: ignore[arg-type]


def recipe(**overrides: object) -> Recipe:
    base: dict[str, object] = {
        "length.mode": "none",
        "length.max_response_tokens": 24,
        "length.max_prompt_tokens": 64,
        "length.interruption.phrase": PHRASE,
        "precision.generator_dtype": "float32",
        "sampling.temperature": 0.7,
    }
    base.update(overrides)
    return apply_overrides(Recipe(), base)


def trainer_logprobs(model: PreTrainedModel, rollouts: list[Rollout], temperature: float) -> list[torch.Tensor]:
    """``token_logprobs`` of the finished sequences, one at a time (the trainer's computation, float32)."""
    out = []
    for r in rollouts:
        ids = torch.tensor([r.prompt_ids + r.response_ids])
        with torch.no_grad():
            lp = token_logprobs(model, ids, temperature=temperature)[0]
        out.append(lp[len(r.prompt_ids) - 1 :])
    return out


def check_invariants(r: Rollout) -> None:
    n = len(r.response_ids)
    assert len(r.logprobs) == len(r.versions) == len(r.loss_mask) == len(r.injected) == n
    assert all(lp == 0.0 for lp, inj in zip(r.logprobs, r.injected, strict=True) if inj)
    assert all(lp <= 0.0 for lp in r.logprobs)
