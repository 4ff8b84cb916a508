"""FLOPs estimates for decoder-only transformers (compute accounting).

Counts multiply-adds of matrix products as 2 FLOPs; norms, activations, softmax and embedding lookups are
ignored (a few percent for real models). Per token of a forward pass:

    2 · N_matmul + 4 · n_layers · n_heads · head_dim · context

N_matmul = per layer (q, k, v, o projections + the gated MLP's three matrices) × n_layers + the LM head
(hidden × vocab, counted even when tied to the embedding). ``context`` is the number of positions the token
attends to (QKᵀ and AV cost 2 · n_heads · head_dim each per attended position). Training (forward + backward)
costs 3× the forward.
"""

from __future__ import annotations

from typing import Any

__all__ = ["decoder_flops_per_token", "matmul_params", "sequence_flops"]


def _get(config: Any, name: str, default: Any = None) -> Any:
    value = getattr(config, name, default)
    if value is None:
        raise ValueError(f"model config has no {name!r}: not a decoder-only transformer config")
    return value


def _shape(config: Any) -> tuple[int, int, int, int, int, int, int]:
    hidden = int(_get(config, "hidden_size"))
    layers = int(_get(config, "num_hidden_layers"))
    heads = int(_get(config, "num_attention_heads"))
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or hidden // heads)
    ff = int(_get(config, "intermediate_size"))
    vocab = int(_get(config, "vocab_size"))
    return hidden, layers, heads, kv, head_dim, ff, vocab


def matmul_params(config: Any) -> int:
    """Weights that take part in matrix products per token (attention + gated MLP per layer, plus LM head)."""
    hidden, layers, heads, kv, head_dim, ff, vocab = _shape(config)
    attention = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2
    mlp = 3 * hidden * ff
    return layers * (attention + mlp) + hidden * vocab


def decoder_flops_per_token(config: Any, *, context: float = 0.0) -> float:
    """Forward FLOPs of one token that attends to ``context`` positions: 2·N_matmul + 4·L·H·d_head·context."""
    if context < 0:
        raise ValueError("context must be >= 0")
    _hidden, layers, heads, _kv, head_dim, _ff, _vocab = _shape(config)
    return 2.0 * matmul_params(config) + 4.0 * layers * heads * head_dim * context


def sequence_flops(config: Any, prompt_tokens: int, response_tokens: int, *, training: bool = False) -> float:
    """FLOPs to process a prompt and a response with causal attention (token i attends to i + 1 positions).

    Forward only by default (generation with a KV cache does the same work as one full forward); with
    ``training`` it is forward + backward (3×), the trainer's cost for the same tokens.
    """
    total = prompt_tokens + response_tokens
    if total <= 0:
        return 0.0
    _hidden, layers, heads, _kv, head_dim, _ff, _vocab = _shape(config)
    attended = total * (total + 1) / 2.0
    flops = 2.0 * matmul_params(config) * total + 4.0 * layers * heads * head_dim * attended
    return 3.0 * flops if training else flops
