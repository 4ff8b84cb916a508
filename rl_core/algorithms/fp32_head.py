"""FP32 LM head for any Hugging Face causal LM, and per-token log-probs from a model.

``enable_fp32_lm_head(model)`` swaps the output projection for an ``FP32LMHead``: the hidden state and the
weight are upcast and the matmul and logits are computed in float32, with autocast disabled, whatever the
dtype of the rest of the model. Use it on the generator's model and the trainer's model alike.

``operands`` (the recipe's ``precision.lm_head_operands``) picks how the float32 matmul is computed
(``rl_core.algorithms.split_matmul``): ``float32`` exact, at the float32 rate; ``bfloat16`` float32 accumulation and
logits over bf16-rounded operands (tensor cores; the rounding moves log-probs by ~1e-2); ``bf16x6`` (``bf16x3``)
error-compensated: each float32 operand split into three (two) bfloat16 pieces whose cross products are summed
with float32 accumulation, on tensor cores at float32 accuracy (max |delta log-prob| ~1e-6; ``bf16x3`` ~4e-5). In a
bfloat16 generator the operands are bfloat16 already, so there every mode computes the same logits (the compensated
ones with their single non-zero piece; the static decoder computes them exactly, ``head.operands`` float32).
Where ``out_dtype`` is unavailable (CPU) the same numbers come from a float32 matmul of the bf16 pieces.

Invariants:
- The head keeps the *same* ``weight`` (and ``bias``) Parameter objects: tied embeddings stay tied (the weight
  is still ``get_input_embeddings().weight``), the state-dict keys are unchanged, the optimiser sees the same
  parameter, and gradients flow to the stored weight in its own dtype.
- The head is still an ``nn.Linear`` (code that looks for one keeps working) and the swap is idempotent.
- Without autograd the float32 upcast of a bf16/fp16 weight is cached until the weight changes in place (a
  generator's weight load), so decoding reads the float32 head once per token instead of converting it per step.
"""

from __future__ import annotations

from typing import Any, cast, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rl_core.algorithms import split_matmul
from rl_core.algorithms.split_matmul import Scheme, compensated_mm

HeadOperands = Scheme  # the recipe's precision.lm_head_operands

# Where they were before split_matmul existed (the static decoder and the CUDA tests use them): the same objects.
_mm_float_out = split_matmul.mm_float_out
_OUT_DTYPE_MM = split_matmul._OUT_DTYPE_MM


class _SplitOperandsLinear(torch.autograd.Function):
    """hidden @ weight.T by a ``split_matmul`` scheme (float32 accumulation and output). Backward uses the same
    scheme on the incoming float32 gradient, with float32 results cast to each input's dtype: for ``bfloat16``
    the usual mixed-precision backward of a linear layer, for ``bf16x6`` float32-accurate gradients."""

    @staticmethod
    def forward(ctx: Any, hidden: Tensor, weight: Tensor, scheme: Scheme) -> Tensor:
        h = hidden.reshape(-1, hidden.shape[-1])
        ctx.save_for_backward(h, weight)
        ctx.hidden_shape, ctx.hidden_dtype, ctx.scheme = hidden.shape, hidden.dtype, scheme
        return compensated_mm(h, weight.t(), scheme).reshape(*hidden.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        h, w = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        grad_h = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_h = compensated_mm(g, w, ctx.scheme).reshape(ctx.hidden_shape).to(ctx.hidden_dtype)
        if ctx.needs_input_grad[1]:
            grad_w = compensated_mm(g.t(), h, ctx.scheme).to(w.dtype)
        return grad_h, grad_w, None


class FP32LMHead(nn.Linear):
    """An ``nn.Linear`` whose forward runs in float32 on the stored (possibly bf16/fp16) weight, its matmul by
    ``scheme`` (module doc). ``operands`` is bfloat16 for the rounded-operand scheme, else float32 (what an exact
    float32 reimplementation, e.g. the static decoder, must compute)."""

    operands: torch.dtype = torch.float32
    scheme: Scheme = "float32"

    @classmethod
    def wrapping(cls, linear: nn.Linear, scheme: Scheme = "float32") -> FP32LMHead:
        """A head sharing ``linear``'s Parameters (no copy, no new allocation)."""
        head = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        head.weight = linear.weight
        head.bias = linear.bias
        head.set_scheme(scheme)
        return head

    def set_scheme(self, scheme: Scheme) -> None:
        self.scheme = scheme
        self.operands = torch.bfloat16 if scheme == "bfloat16" else torch.float32

    def forward(self, hidden: Tensor) -> Tensor:
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            bias = self.bias.float() if self.bias is not None else None
            if self.scheme != "float32":
                out = cast(Tensor, _SplitOperandsLinear.apply(hidden, self.weight, self.scheme))  # type: ignore[no-untyped-call]
                return out if bias is None else out + bias
            return F.linear(hidden.float(), self._float_weight(), bias)

    def _float_weight(self) -> Tensor:
        """The weight in float32. Without autograd (generation) a reduced-precision weight is upcast once per
        weight update, not per decode step: the copy is cached against the weight's storage and in-place version
        counter, which every in-place load (``copy_``) bumps. Costs one float32 copy of the head in memory."""
        weight = self.weight
        if weight.dtype == torch.float32 or (torch.is_grad_enabled() and weight.requires_grad):
            return weight.float()
        key = (weight.data_ptr(), weight._version, weight.device)
        cached = self.__dict__.get("_fp32_cache")
        if cached is None or cached[0] != key:
            cached = (key, weight.detach().float())
            self.__dict__["_fp32_cache"] = cached
        return cached[1]


def enable_fp32_lm_head(model: nn.Module, operands: HeadOperands = "float32") -> nn.Module:
    """Make ``model``'s LM head compute in float32 (in place; returns the model). Idempotent; a second call sets
    ``operands``."""
    get_out = getattr(model, "get_output_embeddings", None)
    set_out = getattr(model, "set_output_embeddings", None)
    if get_out is None or set_out is None:
        raise TypeError(f"{type(model).__name__} has no get/set_output_embeddings: not a causal LM")
    if operands not in get_args(HeadOperands):
        raise ValueError(f"operands must be one of {get_args(HeadOperands)}, got {operands!r}")
    head = get_out()
    if isinstance(head, FP32LMHead):
        head.set_scheme(operands)
        return model
    if not isinstance(head, nn.Linear):
        raise TypeError(f"the output embedding of {type(model).__name__} is {type(head).__name__}, not nn.Linear")
    set_out(FP32LMHead.wrapping(head, operands))
    return model


def has_fp32_lm_head(model: nn.Module) -> bool:
    """True if ``model``'s output projection is an FP32LMHead."""
    get_out = getattr(model, "get_output_embeddings", None)
    return get_out is not None and isinstance(get_out(), FP32LMHead)


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions counting only attended tokens (left padding gets position 0), as HF ``generate`` uses."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def logprobs_from_logits(logits: Tensor, targets: Tensor, temperature: float = 1.0) -> Tensor:
    """log softmax(logits / temperature)[target] in float32; logits [..., V], targets [...]."""
    scaled = logits.float()
    if temperature != 1.0:
        scaled = scaled / temperature
    picked = scaled.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(scaled, dim=-1)


def token_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    temperature: float = 1.0,
) -> Tensor:
    """log pi(input_ids[:, t] | input_ids[:, :t]) for t = 1..T-1, shape [B, T-1], float32.

    One full-sequence forward (the trainer's computation). With an ``attention_mask`` the position ids are
    derived from it, so left-padded batches get the positions generation used. ``temperature`` must match the
    sampler's so that both sides score the same distribution.
    """
    kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": False}
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask
        kwargs["position_ids"] = position_ids_from_mask(attention_mask)
    logits = cast(Tensor, model(**kwargs).logits)
    return logprobs_from_logits(logits[:, :-1], input_ids[:, 1:], temperature)
