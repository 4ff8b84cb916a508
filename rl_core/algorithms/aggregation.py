"""Loss aggregation with a batch-global normaliser: token, sample and prompt averages.

Each mode is expressed as a per-token weight w_{i,t} computed once on the *whole* optimiser batch; the loss is
the plain sum Σ w·ℓ. Any split of the batch into micro-batches (gradient accumulation) or across data-parallel
ranks therefore sums to exactly the full-batch loss and gradient: slice ``w`` together with the data and add.

With m the loss mask, L_i = Σ_t m_{i,t} (tokens of response i) and T_g = Σ_{i in g} L_i (tokens of prompt g):
- token:  w = m / Σ m                      (every token in the batch equal)
- sample: w = m / (L_i · n_responses)      (every response equal; GRPO)
- prompt: w = m / (T_g · n_prompts)        (every prompt equal, tokens averaged within its group; ScaleRL)
Responses (prompts) with no loss tokens do not count in n_responses (n_prompts). An empty batch has zero
weights (loss 0, never NaN). Invariant: for a non-empty batch the weights sum to 1.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

AggregationMode = Literal["token", "sample", "prompt"]
AGGREGATIONS: tuple[AggregationMode, ...] = ("token", "sample", "prompt")


def token_weights(
    mask: Tensor,
    group_ids: Tensor | None,
    mode: AggregationMode,
    *,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Per-token weights [B, T] for the whole batch (see module doc). ``group_ids`` [B] names each response's
    prompt and is required for ``prompt``; ids need not be contiguous or sorted."""
    if mask.dim() != 2:
        raise ValueError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    m = mask.to(torch.float64)
    lengths = m.sum(dim=1)  # L_i
    if mode == "token":
        total = m.sum()
        scale = torch.where(total > 0, 1.0 / total.clamp(min=1.0), torch.zeros_like(total))
        return (m * scale).to(dtype)
    if mode == "sample":
        n = (lengths > 0).sum().to(torch.float64)
        per_row = torch.where(lengths > 0, 1.0 / (lengths.clamp(min=1.0) * n.clamp(min=1.0)), 0.0)
        return (m * per_row[:, None]).to(dtype)
    if mode == "prompt":
        if group_ids is None:
            raise ValueError("prompt aggregation needs group_ids")
        if group_ids.shape != (mask.shape[0],):
            raise ValueError(f"group_ids must be [B] = [{mask.shape[0]}], got {tuple(group_ids.shape)}")
        _, inverse = torch.unique(group_ids, return_inverse=True)
        n_groups_all = int(inverse.max().item()) + 1 if inverse.numel() else 0
        group_tokens = torch.zeros(n_groups_all, dtype=torch.float64, device=mask.device)
        group_tokens.index_add_(0, inverse, lengths)  # T_g
        n_prompts = (group_tokens > 0).sum().to(torch.float64)
        t_of_row = group_tokens[inverse]
        per_row = torch.where(t_of_row > 0, 1.0 / (t_of_row.clamp(min=1.0) * n_prompts.clamp(min=1.0)), 0.0)
        return (m * per_row[:, None]).to(dtype)
    raise ValueError(f"unknown aggregation {mode!r}; allowed: {', '.join(AGGREGATIONS)}")


def aggregate(per_token: Tensor, weights: Tensor) -> Tensor:
    """Σ w·ℓ: the micro-batch's share of the batch loss (sum these over micro-batches and ranks)."""
    if per_token.shape != weights.shape:
        raise ValueError(f"per_token {tuple(per_token.shape)} and weights {tuple(weights.shape)} differ")
    return (per_token * weights.to(per_token.dtype)).sum()


def aggregate_loss(per_token: Tensor, mask: Tensor, group_ids: Tensor | None, mode: AggregationMode) -> Tensor:
    """Whole-batch convenience: ``aggregate(per_token, token_weights(mask, group_ids, mode))``."""
    return aggregate(per_token, token_weights(mask, group_ids, mode, dtype=per_token.dtype))
