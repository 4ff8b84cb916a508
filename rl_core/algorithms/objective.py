"""The recipe's policy objective on one micro-batch: loss + aggregation, with monitoring metrics.

Trainer usage (exact under gradient accumulation and data parallelism):

    weights = token_weights(mask, group_ids, recipe.loss.aggregation)      # once, on the whole batch
    for rows in micro_batches:
        out = policy_objective(recipe.loss, inputs_for(rows), weights[rows])
        out.loss.backward()                                               # gradients add up to the batch's
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rl_core.algorithms.aggregation import aggregate
from rl_core.algorithms.losses import PolicyLossInputs, compute_policy_loss
from rl_core.recipe.model import LossConfig


@dataclass(frozen=True)
class ObjectiveResult:
    """``loss``: this micro-batch's share of the batch loss (scalar, differentiable).

    Metrics are over this micro-batch's loss tokens: ``clip_fraction`` (tokens clipped or capped),
    ``ratio_mean``/``ratio_max`` (importance ratio), ``kl_mean`` (k3, 0 when off), ``n_tokens``.
    """

    loss: Tensor
    clip_fraction: float
    ratio_mean: float
    ratio_max: float
    kl_mean: float
    n_tokens: int


def policy_objective(cfg: LossConfig, inputs: PolicyLossInputs, weights: Tensor) -> ObjectiveResult:
    """Apply the recipe's loss to ``inputs`` and weight it with the batch-global ``weights`` slice."""
    out = compute_policy_loss(cfg, inputs)
    loss = aggregate(out.per_token, weights)
    mask = inputs.mask.bool()
    n = int(mask.sum().item())
    with torch.no_grad():
        if n:
            ratios = out.ratio[mask]
            clip_fraction = float(out.clipped[mask].float().mean().item())
            ratio_mean = float(ratios.mean().item())
            ratio_max = float(ratios.max().item())
            kl_mean = float(out.kl[mask].mean().item()) if out.kl is not None else 0.0
        else:
            clip_fraction, ratio_mean, ratio_max, kl_mean = 0.0, 1.0, 1.0, 0.0
    return ObjectiveResult(
        loss=loss,
        clip_fraction=clip_fraction,
        ratio_mean=ratio_mean,
        ratio_max=ratio_max,
        kl_mean=kl_mean,
        n_tokens=n,
    )
