"""Token sampling with temperature and top-p, returning float32 log-probs of the tempered distribution."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["sample_next"]


def sample_next(
    logits: Tensor, *, temperature: float, top_p: float, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Sample one token per row of ``logits`` [B, V]; returns (tokens [B] int64, logprobs [B] float32).

    The log-prob is that of the tempered full softmax (the policy the trainer scores), also when top-p
    restricts the sampling set: top-p is a sampling-time truncation, not part of the policy.
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    scaled = logits.float()
    if temperature != 1.0:
        scaled = scaled / temperature
    logp = torch.log_softmax(scaled, dim=-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass strictly before each token
        sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)  # always keeps the top token
        choice = torch.multinomial(sorted_p, 1, generator=generator)
        tokens = order.gather(-1, choice).squeeze(-1)
    else:
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
