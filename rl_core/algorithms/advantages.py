"""Rewards and advantages: Â_i = r_i − mean(r over the prompt's group), then an optional std normalisation.

- ``batch``: Â / (std of all Â in the batch + eps)  (ScaleRL)
- ``group``: Â / (std of r within the prompt's group + eps)  (GRPO)
- ``none``:  Â
Standard deviations are population std (no Bessel correction). Zero-variance groups get Â = 0 in every mode.
Apply zero-variance filtering *before* this function when it is on: the batch std is over the responses that
enter the loss.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from rl_core.algorithms.length import overlong_penalty
from rl_core.recipe.model import LengthConfig, RewardConfig

Normalization = Literal["batch", "group", "none"]
RewardScheme = Literal["pm1", "binary"]


def rewards_from_correctness(correct: Tensor, scheme: RewardScheme = "pm1") -> Tensor:
    """Verifier outcome (bool [N]) -> float rewards: ``pm1`` gives +1/−1, ``binary`` gives 1/0."""
    c = correct.bool()
    if scheme == "pm1":
        return torch.where(c, 1.0, -1.0).to(torch.float32)
    if scheme == "binary":
        return c.to(torch.float32)
    raise ValueError(f"unknown reward scheme {scheme!r}; allowed: pm1, binary")


def recipe_rewards(correct: Tensor, lengths: Tensor, reward: RewardConfig, length: LengthConfig) -> Tensor:
    """Rewards as a recipe defines them: the ``reward.scheme`` values, plus DAPO's overlong penalty (on the
    response lengths [N]) when ``length.mode == "overlong_penalty"``."""
    rewards = rewards_from_correctness(correct, reward.scheme)
    if length.mode == "overlong_penalty":
        rewards = rewards + overlong_penalty(
            lengths, length.max_response_tokens, length.overlong.cache_tokens, length.overlong.penalty
        )
    return rewards


def group_index(group_ids: Tensor) -> tuple[Tensor, int]:
    """Map arbitrary group ids [N] to contiguous indices 0..G-1; returns (index [N], G)."""
    uniq, inverse = torch.unique(group_ids, return_inverse=True)
    return inverse, int(uniq.numel())


def group_mean(values: Tensor, group_ids: Tensor) -> Tensor:
    """Mean of ``values`` over each element's group, broadcast back to [N]."""
    inverse, n = group_index(group_ids)
    sums = torch.zeros(n, dtype=values.dtype, device=values.device).index_add_(0, inverse, values)
    counts = torch.bincount(inverse, minlength=n).to(values.dtype)
    return (sums / counts)[inverse]


def compute_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    normalization: Normalization = "batch",
    *,
    std_eps: float = 1e-6,
) -> Tensor:
    """Advantages [N] for rewards [N] of responses whose prompts are ``group_ids`` [N] (see module doc)."""
    if rewards.dim() != 1 or group_ids.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_ids must both be [N]; got {tuple(rewards.shape)}, {tuple(group_ids.shape)}"
        )
    r = rewards.to(torch.float64)
    centred = r - group_mean(r, group_ids)
    if normalization == "none":
        adv = centred
    elif normalization == "group":
        std = group_mean(centred.square(), group_ids).sqrt()
        adv = centred / (std + std_eps)
    elif normalization == "batch":
        std = centred.square().mean().sqrt() if centred.numel() else centred.new_zeros(())
        adv = centred / (std + std_eps)
    else:
        raise ValueError(f"unknown advantage normalization {normalization!r}; allowed: batch, group, none")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    return adv.to(out_dtype)
