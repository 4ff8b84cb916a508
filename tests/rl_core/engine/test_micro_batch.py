"""Micro-batches sized from free memory: the plan's invariants, its estimate against a real CPU backward,
and ``TorchTrainer(micro_batch_size="auto")`` taking the step the whole batch takes."""

from __future__ import annotations

import copy

import pytest
import torch

from rl_core.engine.batch import build_train_batch, group_rewards
from rl_core.engine.micro_batch import (
    Shape,
    activation_bytes_per_token,
    free_bytes,
    head_chunk_bytes,
    plan_micro_batch,
    shape_of,
)
from rl_core.engine.trainer import TorchTrainer

from .test_trainers import RECIPE, _groups, _model

QWEN_05B = Shape(hidden=896, intermediate=4864, layers=24, heads=14, kv_heads=2, vocab=151_936)
GIB = 1 << 30


def test_rows_grow_with_free_memory_and_stay_within_the_batch() -> None:
    plans = [
        plan_micro_batch(g * GIB, QWEN_05B, sequence=2048, batch_rows=32, chunk_tokens=883) for g in (8, 16, 32, 64)
    ]
    assert plans[0].checkpointing and not any(p.checkpointing for p in plans[1:])  # more memory: checkpointing off
    rows = [p.rows for p in plans[1:]]  # under the same choice rows only grow
    assert rows == sorted(rows) and rows[0] >= 1 and rows[-1] <= 32 and rows[-1] > rows[0]
    huge = plan_micro_batch(10_000 * GIB, QWEN_05B, sequence=2048, batch_rows=32, chunk_tokens=883)
    assert huge.rows == 32 and not huge.checkpointing and huge.fits


def test_checkpointing_only_when_one_row_does_not_fit_without_it() -> None:
    per_row = activation_bytes_per_token(QWEN_05B) * 2048
    head = head_chunk_bytes(QWEN_05B, 883)
    just = plan_micro_batch(int((per_row + head) / 0.8) + 1, QWEN_05B, sequence=2048, batch_rows=32, chunk_tokens=883)
    assert not just.checkpointing and just.rows == 1
    tight = plan_micro_batch(int((per_row / 2 + head) / 0.8), QWEN_05B, sequence=2048, batch_rows=32, chunk_tokens=883)
    assert tight.checkpointing and tight.rows >= 1 and tight.fits
    assert tight.bytes_per_row < per_row / 4  # checkpointing keeps each layer's input only
    none = plan_micro_batch(1 << 20, QWEN_05B, sequence=2048, batch_rows=32, chunk_tokens=883)
    assert none.rows == 1 and none.checkpointing and not none.fits
    with pytest.raises(ValueError):
        plan_micro_batch(GIB, QWEN_05B, sequence=0, batch_rows=4, chunk_tokens=8)


def test_the_estimate_bounds_a_real_backward_within_a_small_factor() -> None:
    """The tiny model's measured saved-for-backward bytes per token, under float32 (no autocast: the estimate's bf16
    tensors are float32 here, so it may undercount by up to 2x, never more)."""
    model = _model()
    shape = shape_of(model.config)
    ids = torch.randint(4, 90, (4, 64))
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(input_ids=ids, use_cache=False)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    measured = (sum(saved) - params) / ids.numel()  # weights saved by reference are not activations
    estimate = activation_bytes_per_token(shape)
    assert estimate / 2 <= measured <= 2 * estimate, (measured, estimate)


def test_auto_micro_batches_take_the_whole_batch_step(monkeypatch: pytest.MonkeyPatch) -> None:
    assert free_bytes(torch.device("cpu")) > 0
    model = _model()
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    whole = TorchTrainer(copy.deepcopy(model), RECIPE, device=torch.device("cpu"), micro_batch_size=None)
    auto = TorchTrainer(copy.deepcopy(model), RECIPE, device=torch.device("cpu"), micro_batch_size="auto")
    shape, seq = shape_of(model.config), batch.input_ids.shape[1]
    per_row = activation_bytes_per_token(shape) * seq
    head = head_chunk_bytes(shape, batch.rows * seq)  # the fused head's chunk holds every token of this small batch
    monkeypatch.setattr("rl_core.engine.trainer.free_bytes", lambda device: int((2.5 * per_row + head) / 0.8) + 1)
    a, b = whole.step(batch), auto.step(batch)
    assert auto.plan is not None and auto.plan.rows == 2 and not auto.plan.checkpointing
    assert b.loss == pytest.approx(a.loss, rel=1e-5) and b.grad_norm == pytest.approx(a.grad_norm, rel=1e-4)
    for (name, p), q in zip(whole.model.named_parameters(), auto.model.parameters(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=1e-5, msg=name)
    monkeypatch.setattr("rl_core.engine.trainer.free_bytes", lambda device: int((per_row / 3 + head) / 0.8))
    auto.step(batch)  # not one row fits as is: checkpointed layers, the same objective
    assert auto.plan.checkpointing and any(getattr(m, "gradient_checkpointing", False) for m in auto.model.modules())
