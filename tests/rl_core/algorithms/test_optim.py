"""Optimiser, schedule and clipping from the recipe."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.algorithms.optim import build_optimizer, build_scheduler, clip_gradients, lr_multiplier
from rl_core.recipe import Recipe, ScheduleConfig


def test_adamw_from_the_paper_recipe() -> None:
    opt = build_optimizer([torch.nn.Parameter(torch.zeros(3))], Recipe().optimizer)
    group = opt.param_groups[0]
    assert (group["lr"], group["eps"], group["weight_decay"], group["betas"]) == (5e-7, 1e-15, 0.01, (0.9, 0.999))


def test_warmup_then_constant() -> None:
    cfg = Recipe().schedule  # 100 warm-up steps, constant
    assert lr_multiplier(0, cfg) == pytest.approx(0.01)
    assert lr_multiplier(49, cfg) == pytest.approx(0.5)
    assert lr_multiplier(99, cfg) == 1.0 and lr_multiplier(10_000, cfg) == 1.0
    assert lr_multiplier(0, ScheduleConfig(warmup_steps=0)) == 1.0


def test_linear_and_cosine_decay_closed_form() -> None:
    lin = ScheduleConfig(type="linear", warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    assert lr_multiplier(10, lin) == 1.0
    assert lr_multiplier(60, lin) == pytest.approx(0.55)
    assert lr_multiplier(110, lin) == pytest.approx(0.1) and lr_multiplier(500, lin) == pytest.approx(0.1)
    cos = ScheduleConfig(type="cosine", warmup_steps=0, total_steps=100)
    assert lr_multiplier(25, cos) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_multiplier(50, cos) == pytest.approx(0.5)
    assert lr_multiplier(100, cos) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError):
        lr_multiplier(-1, cos)


def test_scheduler_drives_the_optimizer() -> None:
    p = torch.nn.Parameter(torch.zeros(2))
    opt = build_optimizer([p], Recipe().optimizer.model_copy(update={"lr": 1.0}))
    sched = build_scheduler(opt, ScheduleConfig(warmup_steps=4))
    lrs = []
    for _ in range(6):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])


def test_gradient_clipping() -> None:
    p = torch.nn.Parameter(torch.zeros(2))
    p.grad = torch.tensor([3.0, 4.0])
    assert clip_gradients([p], Recipe().optimizer) == pytest.approx(5.0)
    assert torch.allclose(p.grad, torch.tensor([0.6, 0.8]))
    p.grad = torch.tensor([3.0, 4.0])
    assert clip_gradients([p], Recipe().optimizer.model_copy(update={"max_grad_norm": None})) == pytest.approx(5.0)
    assert torch.equal(p.grad, torch.tensor([3.0, 4.0]))
