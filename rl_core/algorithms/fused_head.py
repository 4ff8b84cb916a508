"""The LM head fused with the log-softmax: log pi of the sampled tokens from hidden states, chunked over tokens.

``fused_head_logprobs(hidden [N, H], weight [V, H], bias, targets [N], scheme, temperature, chunk)`` returns
(log softmax(hidden @ weight.T + bias) / T)[targets] and the entropy of that distribution, both float32 [N], the
entropy detached. The head's matmuls use ``scheme`` (``rl_core.algorithms.split_matmul``: ``float32`` exact,
``bf16x3`` / ``bf16x6`` error-compensated on tensor cores, ``bfloat16`` rounded operands), forward and backward.

Invariants:
- At most one chunk of ``chunk`` tokens' float32 logits (and its softmax) exists at once, in forward and in
  backward; nothing of size [N, V] is saved: the backward recomputes each chunk's logits from the saved hidden
  states and log-sum-exp (N floats), as a fused linear-cross-entropy kernel does.
- The gradient is that of the unfused computation: d lp / d logits = (onehot(target) - softmax) / T.
- The weight is split into its bfloat16 pieces once per call (forward) and once per backward, not per chunk.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor

from rl_core.algorithms.split_matmul import Scheme, compensated_mm, split_mm, split_operand


def _head_rhs(weight: Tensor, scheme: Scheme) -> Tensor:
    """weight.T [H, V] prepared as the right operand of hidden @ weight.T."""
    if scheme == "float32":
        return weight.float().t()
    return split_operand(weight, scheme, 1, 1).t()


def _lhs_mm(a: Tensor, rhs: Tensor, scheme: Scheme) -> Tensor:
    """a @ rhs for a prepared right operand (``_head_rhs`` or the like)."""
    if scheme == "float32":
        return torch.mm(a.float(), rhs)
    return split_mm(split_operand(a, scheme, 0, 1), rhs, scheme)


def _scaled_logits(h: Tensor, rhs: Tensor, bias: Tensor | None, scheme: Scheme, temperature: float) -> Tensor:
    logits = _lhs_mm(h, rhs, scheme)
    if bias is not None:
        logits = logits + bias.float()
    return logits / temperature if temperature != 1.0 else logits


class _FusedHeadLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        hidden: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        targets: Tensor,
        scheme: Scheme,
        temperature: float,
        chunk: int,
    ) -> tuple[Tensor, Tensor]:
        n = hidden.shape[0]
        rhs = _head_rhs(weight, scheme)
        logprobs = torch.empty(n, dtype=torch.float32, device=hidden.device)
        entropy = torch.empty_like(logprobs)
        lse = torch.empty_like(logprobs)
        for start in range(0, n, chunk):
            part = slice(start, min(n, start + chunk))
            s = _scaled_logits(hidden[part], rhs, bias, scheme, temperature)
            lse[part] = torch.logsumexp(s, dim=-1)
            logprobs[part] = s.gather(-1, targets[part].unsqueeze(-1)).squeeze(-1) - lse[part]
            s.sub_(lse[part].unsqueeze(-1))  # log p
            entropy[part] = -(s.exp() * s).sum(-1)
            del s
        ctx.save_for_backward(hidden, weight, bias, targets, lse)
        ctx.scheme, ctx.temperature, ctx.chunk = scheme, temperature, chunk
        ctx.mark_non_differentiable(entropy)
        return logprobs, entropy

    @staticmethod
    def backward(ctx: Any, grad_lp: Tensor, _grad_ent: Tensor | None) -> tuple[Tensor | None, ...]:
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        scheme: Scheme = ctx.scheme
        temperature: float = ctx.temperature
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        rhs = _head_rhs(weight, scheme)
        w_rhs = None
        if need_h:  # weight [V, H] as the right operand of grad_logits [n, V] @ weight
            w_rhs = weight.float() if scheme == "float32" else split_operand(weight, scheme, 1, 0)
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
        n = hidden.shape[0]
        g_all = grad_lp.float()
        for start in range(0, n, ctx.chunk):
            part = slice(start, min(n, start + ctx.chunk))
            g = g_all[part]
            s = _scaled_logits(hidden[part], rhs, bias, scheme, temperature)
            gz = s.sub_(lse[part].unsqueeze(-1)).exp_().mul_(-g.unsqueeze(-1))  # -g * softmax, in place
            gz.scatter_add_(-1, targets[part].unsqueeze(-1), g.unsqueeze(-1))
            if temperature != 1.0:
                gz.div_(temperature)
            if grad_h is not None and w_rhs is not None:
                grad_h[part] = _lhs_mm(gz, w_rhs, scheme).to(hidden.dtype)
            if grad_w is not None:
                grad_w += compensated_mm(gz.t(), hidden[part], scheme)
            if grad_b is not None:
                grad_b += gz.sum(0)
            del s, gz
        return (
            grad_h,
            None if grad_w is None else grad_w.to(weight.dtype),
            None if grad_b is None else grad_b.to(bias.dtype),
            None,
            None,
            None,
            None,
        )


def fused_head_logprobs(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    targets: Tensor,
    *,
    scheme: Scheme = "float32",
    temperature: float = 1.0,
    chunk: int = 1024,
) -> tuple[Tensor, Tensor]:
    """(log-probs of ``targets`` [N] float32, differentiable; entropy [N] float32, detached); see module doc."""
    with torch.autocast(hidden.device.type, enabled=False):
        out = _FusedHeadLogprobs.apply(hidden, weight, bias, targets, scheme, temperature, max(1, chunk))  # type: ignore[no-untyped-call]
    return cast(tuple[Tensor, Tensor], out)
