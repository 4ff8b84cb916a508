"""Trainer backends: exact micro-batching, the recipe's objective with generator log-probs, DeepSpeed == torch."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from rl_core.engine.batch import Group, Sample, build_train_batch, group_rewards
from rl_core.engine.trainer import TorchTrainer, micro_batch_loss
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe import Recipe, apply_overrides

RECIPE = apply_overrides(
    Recipe(),
    {
        "optimizer.lr": 1e-3,
        "optimizer.eps": 1e-8,
        "schedule.warmup_steps": 0,
        "precision.trainer_dtype": "float32",
        "loss.aggregation": "prompt",
    },
)


def _model() -> torch.nn.Module:
    cfg = ModelConfig.model_validate({"preset": "tiny", "num_hidden_layers": 1, "hidden_size": 32})
    model = build_model(cfg, build_tokenizer(cfg), fp32_lm_head=True)
    model.train()
    return model


def _groups(model: torch.nn.Module, seed: int = 0) -> list[Group]:
    """Groups with prompts and responses of different lengths; generator log-probs from the model itself,
    perturbed so that importance ratios differ from 1."""
    g = torch.Generator().manual_seed(seed)
    groups = []
    for gi in range(3):
        samples = []
        for si in range(3):
            p = torch.randint(6, 90, (2 + gi,), generator=g).tolist()
            r = torch.randint(6, 90, (1 + (gi + si) % 4,), generator=g).tolist()
            samples.append(
                Sample(
                    problem_id=f"p{gi}",
                    prompt_ids=p,
                    response_ids=r,
                    logprobs=[-1.0 - 0.3 * k for k in range(len(r))],
                    versions=[0] * len(r),
                    loss_mask=[1] * len(r),
                    correct=(si + gi) % 2 == 0,
                )
            )
        groups.append(Group(f"p{gi}", tuple(samples)))
    return groups


def test_batch_layout_aligns_generator_logprobs_with_trainer_logprobs() -> None:
    model = _model()
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    assert batch.weights.sum().item() == pytest.approx(1.0)
    # The old log-probs sit where the trainer's log-probs of the same response tokens are.
    for i, s in enumerate(s for g in groups for s in g.samples):
        n = len(s.response_ids)
        assert batch.input_ids[i, batch.prompt_width : batch.prompt_width + n].tolist() == s.response_ids
        assert batch.input_ids[i, batch.prompt_width - len(s.prompt_ids) : batch.prompt_width].tolist() == s.prompt_ids
        assert batch.old_logprobs[i, :n].tolist() == pytest.approx(s.logprobs)
        assert batch.mask[i].sum().item() == n


def test_zero_variance_groups_are_dropped_when_the_recipe_says_so() -> None:
    groups = _groups(_model())
    same = Group("same", tuple(s for s in groups[0].samples if s.correct) * 2)
    rewards = group_rewards([*groups, same], RECIPE)
    batch = build_train_batch([*groups, same], rewards, RECIPE, pad_id=0)
    assert batch is not None and batch.rows == 9
    keep = apply_overrides(RECIPE, {"filters.zero_variance": "none"})
    kept = build_train_batch([*groups, same], group_rewards([*groups, same], keep), keep, pad_id=0)
    assert kept is not None and kept.rows == 9 + len(same.samples)


@pytest.mark.parametrize("loss", ["cispo", "dapo", "grpo"])
def test_micro_batching_is_exact(loss: str) -> None:
    recipe = apply_overrides(RECIPE, {"loss.type": loss})
    base = _model()
    groups = _groups(base)
    batch = build_train_batch(groups, group_rewards(groups, recipe), recipe, pad_id=0)
    assert batch is not None
    grads = []
    for size in (None, 1, 4):
        model = copy.deepcopy(base)
        model.zero_grad()
        total = torch.zeros(())
        for start in range(0, batch.rows, size or batch.rows):
            rows = slice(start, min(batch.rows, start + (size or batch.rows)))
            r = micro_batch_loss(model, batch, rows, recipe, torch.device("cpu"))
            r.loss.backward()  # type: ignore[no-untyped-call]
            total = total + r.loss.detach()
        grads.append((total, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])))
    for total, g in grads[1:]:
        assert total.item() == pytest.approx(grads[0][0].item(), rel=1e-5, abs=1e-7)
        torch.testing.assert_close(g, grads[0][1], rtol=1e-4, atol=1e-7)


def test_torch_trainer_step_counts_versions_and_reports_ratio_statistics() -> None:
    model = _model()
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    trainer = TorchTrainer(model, RECIPE, device=torch.device("cpu"), micro_batch_size=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    stats = trainer.step(batch)
    assert trainer.version == 1 and stats.tokens == int(batch.mask.sum())
    assert stats.ratio_mean > 0 and stats.entropy > 0 and stats.grad_norm > 0
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_deepspeed_step_matches_torch_and_checkpoints(stage: int, tmp_path: Path) -> None:
    assert_deepspeed_matches_torch(torch.device("cpu"), stage, tmp_path)


def assert_deepspeed_matches_torch(device: torch.device, stage: int, tmp_path: Path) -> None:
    """Two DeepSpeed steps at ZeRO ``stage`` on ``device`` give the torch trainer's losses and weights there; the
    weight-sync stream carries the same weights; a checkpoint restores them (also run on CUDA by tests/cuda)."""
    from rl_core.engine.trainer_deepspeed import DeepSpeedTrainer

    base = _model()
    groups = _groups(base)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    ref = TorchTrainer(copy.deepcopy(base), RECIPE, device=device, micro_batch_size=3)
    ds = DeepSpeedTrainer(copy.deepcopy(base), RECIPE, device=device, zero_stage=stage, micro_batch_size=2)
    for _ in range(2):
        a, b = ref.step(batch), ds.step(batch)
        assert b.loss == pytest.approx(a.loss, rel=1e-4, abs=1e-6)
    assert ds.version == 2
    want, got = ref.weights(), ds.weights()
    for k in want:
        torch.testing.assert_close(got[k].float().cpu(), want[k].float().cpu(), rtol=1e-4, atol=1e-5)
    # The weight-sync stream (one gathered parameter at a time under ZeRO-3) carries the same full weights.
    streamed = {k: v.detach().to("cpu", copy=True) for k, v in ds.weight_items()}
    assert streamed.keys() == want.keys()
    for k in want:
        torch.testing.assert_close(streamed[k].float(), got[k].float().cpu())
    ds.save(str(tmp_path))
    again = DeepSpeedTrainer(copy.deepcopy(base), RECIPE, device=device, zero_stage=stage)
    again.load(str(tmp_path))
    assert again.version == 2
    for k, v in again.weights().items():
        torch.testing.assert_close(v.float().cpu(), got[k].float().cpu())


def test_bf16_head_operands_train_like_the_exact_head() -> None:
    """``precision.lm_head_operands: bfloat16`` (tensor-core head on a GPU) gives the gradient the float32 head gives,
    up to bf16 rounding of the head's operands; master weights and logits stay float32."""
    recipe = apply_overrides(RECIPE, {"precision.trainer_dtype": "bfloat16"})
    cfg = ModelConfig.model_validate({"preset": "tiny", "num_hidden_layers": 1, "hidden_size": 32})
    losses, grads = {}, {}
    for operands in ("float32", "bfloat16"):
        model = build_model(cfg, build_tokenizer(cfg), fp32_lm_head=True, lm_head_operands=operands)  # type: ignore[arg-type]
        model.train()
        groups = _groups(model)
        batch = build_train_batch(groups, group_rewards(groups, recipe), recipe, pad_id=0)
        assert batch is not None
        r = micro_batch_loss(model, batch, slice(0, batch.rows), recipe, torch.device("cpu"))
        r.loss.backward()
        losses[operands] = float(r.loss.detach())
        grads[operands] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert losses["bfloat16"] == pytest.approx(losses["float32"], rel=0.02, abs=1e-4)
    a, b = grads["float32"], grads["bfloat16"]
    assert not torch.equal(a, b)  # the head's operands were really rounded
    assert float(F.cosine_similarity(a, b, dim=0)) > 0.999
    assert float((a - b).norm() / a.norm()) < 0.02
