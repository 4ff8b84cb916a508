"""The recipe's optimiser, learning-rate schedule and gradient clipping.

Schedule (multiplier of ``optimizer.lr`` at 0-based optimiser step s, W = ``warmup_steps``, N = ``total_steps``,
m = ``min_lr_ratio``):
- warm-up, s < W: (s + 1) / W (linear, reaching 1 at the last warm-up step);
- then ``constant``: 1; ``linear``: 1 − (1 − m)·p; ``cosine``: m + (1 − m)·(1 + cos(pi·p))/2, where
  p = min(1, (s − W) / (N − W)) (p = 1 when N = W).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.optim.lr_scheduler import LambdaLR

from rl_core.recipe.model import OptimizerConfig, ScheduleConfig


def build_optimizer(params: Iterable[torch.nn.Parameter], cfg: OptimizerConfig) -> torch.optim.AdamW:
    """AdamW with the recipe's lr, betas, eps and weight decay."""
    return torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)


def lr_multiplier(step: int, cfg: ScheduleConfig) -> float:
    """Multiplier of the base learning rate at 0-based optimiser step ``step`` (see module doc)."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    warmup = cfg.warmup_steps
    if step < warmup:
        return (step + 1) / warmup
    if cfg.type == "constant":
        return 1.0
    assert cfg.total_steps is not None  # enforced by ScheduleConfig's validator
    span = cfg.total_steps - warmup
    progress = 1.0 if span <= 0 else min(1.0, (step - warmup) / span)
    floor = cfg.min_lr_ratio
    if cfg.type == "linear":
        return 1.0 - (1.0 - floor) * progress
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: ScheduleConfig) -> LambdaLR:
    """A LambdaLR applying ``lr_multiplier``; call ``scheduler.step()`` after each ``optimizer.step()``."""
    return LambdaLR(optimizer, lambda step: lr_multiplier(step, cfg))


def clip_gradients(params: Iterable[torch.nn.Parameter], cfg: OptimizerConfig) -> float:
    """Clip the global gradient norm to ``max_grad_norm`` (no-op when None); returns the pre-clip norm."""
    grads = [p for p in params if p.grad is not None]
    if not grads:
        return 0.0
    if cfg.max_grad_norm is None:
        return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in grads])))
    return float(torch.nn.utils.clip_grad_norm_(grads, cfg.max_grad_norm))
