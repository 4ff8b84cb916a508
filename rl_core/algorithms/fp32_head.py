"""FP32 LM head for any Hugging Face causal LM, and per-token log-probs from a model.

``enable_fp32_lm_head(model)`` swaps the output projection for an ``FP32LMHead``: the hidden state and the
weight are upcast and the matmul and logits are computed in float32, with autocast disabled, whatever the
dtype of the rest of the model. Use it on the generator's model and the trainer's model alike.

``operands="bfloat16"`` (the recipe's ``precision.lm_head_operands``) keeps float32 accumulation and float32
logits but rounds the two matmul operands to bfloat16, so a GPU runs the head on tensor cores
(``torch.mm(..., out_dtype=float32)``) instead of at the float32 rate, which at a 152k vocabulary dominates a
small model's step. In a bfloat16 generator the operands are bfloat16 already, so there both modes compute the
same logits; in the trainer (float32 master weights) the mode rounds hidden state and weight like the generator
does. Where ``out_dtype`` is unavailable (CPU) the same numbers come from a float32 matmul of the rounded operands.

Invariants:
- The head keeps the *same* ``weight`` (and ``bias``) Parameter objects: tied embeddings stay tied (the weight
  is still ``get_input_embeddings().weight``), the state-dict keys are unchanged, the optimiser sees the same
  parameter, and gradients flow to the stored weight in its own dtype.
- The head is still an ``nn.Linear`` (code that looks for one keeps working) and the swap is idempotent.
- Without autograd the float32 upcast of a bf16/fp16 weight is cached until the weight changes in place (a
  generator's weight load), so decoding reads the float32 head once per token instead of converting it per step.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

HeadOperands = Literal["float32", "bfloat16"]

_OUT_DTYPE_MM: dict[str, bool] = {}  # device type -> whether torch.mm(..., out_dtype=float32) works there


def _mm_float_out(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` with float32 accumulation and output, for reduced-precision ``a``, ``b``: one tensor-core matmul
    where ``out_dtype`` is supported, else a float32 matmul of the (exactly representable) operands."""
    kind = a.device.type
    if _OUT_DTYPE_MM.get(kind, kind == "cuda"):
        try:
            return torch.mm(a, b, out_dtype=torch.float32)
        except (RuntimeError, TypeError, NotImplementedError) as exc:  # this torch build lacks the op there
            _OUT_DTYPE_MM[kind] = False
            warnings.warn(
                f"torch.mm(..., out_dtype=float32) is unavailable on {kind} ({type(exc).__name__}: {exc}); the "
                "bf16-operand LM head falls back to a float32 matmul of the rounded operands: same logits, "
                "float32 speed",
                RuntimeWarning,
                stacklevel=2,
            )
    return torch.mm(a.float(), b.float())


class _ReducedOperandsLinear(torch.autograd.Function):
    """hidden @ weight.T with both operands rounded to ``dtype``, float32 accumulation and output. Backward uses the
    same operands (and the incoming gradient rounded to ``dtype``), with float32 results cast to each input's
    dtype: the usual mixed-precision backward of a linear layer."""

    @staticmethod
    def forward(ctx: Any, hidden: Tensor, weight: Tensor, dtype: torch.dtype) -> Tensor:
        h = hidden.reshape(-1, hidden.shape[-1]).to(dtype)
        w = weight.to(dtype)
        ctx.save_for_backward(h, w)
        ctx.hidden_shape, ctx.hidden_dtype, ctx.weight_dtype = hidden.shape, hidden.dtype, weight.dtype
        return _mm_float_out(h, w.t()).reshape(*hidden.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        h, w = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1]).to(h.dtype)
        grad_h = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_h = _mm_float_out(g, w).reshape(ctx.hidden_shape).to(ctx.hidden_dtype)
        if ctx.needs_input_grad[1]:
            grad_w = _mm_float_out(g.t(), h).to(ctx.weight_dtype)
        return grad_h, grad_w, None


class FP32LMHead(nn.Linear):
    """An ``nn.Linear`` whose forward runs in float32 on the stored (possibly bf16/fp16) weight; with
    ``operands`` bfloat16, float32 accumulation and output over bfloat16-rounded operands (module doc)."""

    operands: torch.dtype = torch.float32

    @classmethod
    def wrapping(cls, linear: nn.Linear, operands: torch.dtype = torch.float32) -> FP32LMHead:
        """A head sharing ``linear``'s Parameters (no copy, no new allocation)."""
        head = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        head.weight = linear.weight
        head.bias = linear.bias
        head.operands = operands
        return head

    def forward(self, hidden: Tensor) -> Tensor:
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            bias = self.bias.float() if self.bias is not None else None
            if self.operands != torch.float32:
                out = cast(Tensor, _ReducedOperandsLinear.apply(hidden, self.weight, self.operands))  # type: ignore[no-untyped-call]
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
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}.get(operands)
    if dtype is None:
        raise ValueError(f"operands must be 'float32' or 'bfloat16', got {operands!r}")
    head = get_out()
    if isinstance(head, FP32LMHead):
        head.operands = dtype
        return model
    if not isinstance(head, nn.Linear):
        raise TypeError(f"the output embedding of {type(model).__name__} is {type(head).__name__}, not nn.Linear")
    set_out(FP32LMHead.wrapping(head, dtype))
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
