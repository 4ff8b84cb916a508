"""Chunked log-probs of the sampled tokens: equal to the full computation to float32 rounding, in value
and gradient, with the FP32 head in both operand modes and with a plain head under autocast."""

from __future__ import annotations

import copy

import pytest
import torch

from rl_core.engine.batch import build_train_batch, group_rewards
from rl_core.engine.trainer import _chunkable, micro_batch_loss, response_logprobs
from rl_core.recipe import apply_overrides

from .test_trainers import RECIPE, _groups, _model


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    ("operands", "temperature", "chunk"),
    [("float32", 1.0, 3), ("float32", 0.7, 5), ("bfloat16", 1.0, 4), ("float32", 1.0, 0)],
)
def test_chunked_logprobs_and_gradients_equal_the_full_computation(
    operands: str, temperature: float, chunk: int
) -> None:
    recipe = apply_overrides(RECIPE, {"precision.lm_head_operands": operands, "sampling.temperature": temperature})
    model = _model()
    if operands == "bfloat16":
        from rl_core.algorithms.fp32_head import enable_fp32_lm_head

        enable_fp32_lm_head(model, "bfloat16")
    assert _chunkable(model)
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, recipe), recipe, pad_id=0)
    assert batch is not None
    rows = slice(0, batch.rows)
    ids, attn = batch.input_ids, batch.attention_mask
    full_lp, full_ent = response_logprobs(model, ids, attn, batch, recipe, chunk_tokens=None)
    lp, ent = response_logprobs(model, ids, attn, batch, recipe, chunk_tokens=chunk)
    mask = batch.mask.bool()
    assert torch.allclose(lp[mask], full_lp[mask], atol=1e-5, rtol=1e-6)
    assert torch.allclose(ent[mask], full_ent[mask], atol=1e-5, rtol=1e-6)

    other = copy.deepcopy(model)
    micro_batch_loss(model, batch, rows, recipe, torch.device("cpu"), chunk_tokens=None).loss.backward()
    res = micro_batch_loss(other, batch, rows, recipe, torch.device("cpu"), chunk_tokens=chunk)
    res.loss.backward()
    full_g, chunk_g = _grads(model), _grads(other)
    assert full_g.keys() == chunk_g.keys()
    for name, g in full_g.items():
        assert torch.allclose(chunk_g[name], g, atol=1e-6, rtol=1e-4), name


def test_a_plain_head_under_bf16_autocast_chunks_like_the_full_path() -> None:
    from rl_core.models import ModelConfig, build_model, build_tokenizer

    cfg = ModelConfig.model_validate({"preset": "tiny", "num_hidden_layers": 1, "hidden_size": 32})
    model = build_model(cfg, build_tokenizer(cfg), fp32_lm_head=False)
    recipe = apply_overrides(RECIPE, {"precision.trainer_dtype": "bfloat16"})
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, recipe), recipe, pad_id=0)
    assert batch is not None
    ids, attn = batch.input_ids, batch.attention_mask
    full_lp, _ = response_logprobs(model, ids, attn, batch, recipe, chunk_tokens=None)
    lp, _ = response_logprobs(model, ids, attn, batch, recipe, chunk_tokens=2)
    mask = batch.mask.bool()
    assert torch.allclose(lp[mask], full_lp[mask], atol=1e-5)
