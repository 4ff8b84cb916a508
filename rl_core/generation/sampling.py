"""Token sampling with temperature and top-p, returning float32 log-probs of the tempered distribution.

Sampling is by inverse CDF with one uniform number per row: ``sample_with_uniforms(logits, u, ...)`` is a pure
function of its inputs (no RNG inside), so it can run inside a compiled / CUDA-graph-captured decode step, and a
row's sample depends only on its own logits and its own uniform. The generator draws one uniform per row of the
*whole* batch at every sampling event, finished rows included, so the dynamic path (finished rows dropped) and the
static path (finished rows kept in place and masked) consume the same random stream and draw the same tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["sample_next", "sample_with_uniforms"]


def _inverse_cdf(weights: Tensor, u: Tensor) -> Tensor:
    """Index i of each row with cdf[i-1] <= u * total < cdf[i] (never a zero-weight entry)."""
    cdf = weights.cumsum(dim=-1)
    target = u.unsqueeze(-1) * cdf[..., -1:]
    idx = (cdf <= target).sum(dim=-1)
    return idx.clamp(max=weights.shape[-1] - 1)


def sample_with_uniforms(logits: Tensor, u: Tensor, *, temperature: float, top_p: float) -> tuple[Tensor, Tensor]:
    """Sample one token per row of ``logits`` [B, V] from uniforms ``u`` [B] in [0, 1); returns (tokens [B] int64,
    logprobs [B] float32).

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
        choice = _inverse_cdf(sorted_p, u.float())
        tokens = order.gather(-1, choice.unsqueeze(-1)).squeeze(-1)
    else:
        tokens = _inverse_cdf(probs, u.float())
    return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def sample_next(
    logits: Tensor, *, temperature: float, top_p: float, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``sample_with_uniforms`` with one uniform per row drawn from ``generator`` (on the logits' device)."""
    u = torch.rand(logits.shape[0], generator=generator, device=logits.device)
    return sample_with_uniforms(logits, u, temperature=temperature, top_p=top_p)
