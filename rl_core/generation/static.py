"""Static-shape decoding: a preallocated KV cache, rows kept in place, one shape for every decode step.

``StaticDecoder(model, batch=B, cache_len=L, ...)`` runs a Llama/Qwen2-style causal LM (the HF modules' own
weights: embeddings, norms, projections, MLPs, rotary embedding, LM head; no copies) over its own KV cache
``[B, kv_heads, L, head_dim]`` per layer. ``prefill(ids, attn)`` writes the left-padded prompts into slots
``0 .. W-1`` and returns the last position's float32 logits; ``step(feed, slot, u)`` feeds one token per row at
cache slot ``slot`` (the same slot for every row: prompts are left-padded to one width) and returns
``(tokens, logprobs, logits)`` sampled inside the step (``sampling.sample_with_uniforms``, temperature and top-p
baked in). Every step has the same shapes (B, L), so the step is compiled once and, on CUDA, captured once as a
CUDA graph and replayed; finished rows keep computing (their outputs are ignored by the generator) instead of
being dropped, which would change the shape.

Modes (``mode``): ``"eager"``; ``"inductor"`` (``torch.compile`` of the step); on CUDA also ``"graph"`` (the eager
step captured with ``torch.cuda.graph``) and ``"inductor-graph"`` (the compiled step captured).

Invariants:
- Attention sees exactly the prompt's real tokens and the tokens generated so far: ``valid[b, j]`` marks real
  prompt slots (left padding is False) and every generated slot; causality (``j <= slot``) hides the future, so
  stale values in the cache are never read. A padded query attends to itself only (no all-masked row, no NaN).
- Positions count real tokens (left padding gets none), as in ``position_ids_from_mask``.
- Weights are read from the model's own tensors at every step: an in-place load (``WeightLoader``, ``copy_``) is
  seen by the next step, compiled or captured; call ``refresh()`` after a load so the float32 copy of a reduced-
  precision FP32 head is updated in place too.
- The FP32 LM head (``FP32LMHead``) is computed as in eager decoding: float32 hidden state times the float32
  weight (or, with bfloat16 operands, bfloat16 operands with float32 accumulation and output).
"""

from __future__ import annotations

from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rl_core.algorithms.fp32_head import FP32LMHead, _mm_float_out
from rl_core.generation.sampling import sample_with_uniforms

__all__ = ["DecodeMode", "StaticDecoder", "bucket", "supports_static"]

DecodeMode = Literal["eager", "inductor", "graph", "inductor-graph"]

_ARCHS = ("llama", "qwen2")


def bucket(n: int, q: int) -> int:
    """``n`` rounded up to a multiple of ``q``."""
    return -(-n // q) * q


def supports_static(model: nn.Module) -> bool:
    """True for the architectures whose layers ``StaticDecoder`` knows how to run (Llama, Qwen2 without sliding
    window attention) with an ``nn.Linear`` LM head."""
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) not in _ARCHS or getattr(cfg, "use_sliding_window", False):
        return False
    base = getattr(model, "model", None)
    get_out = getattr(model, "get_output_embeddings", None)
    return (
        base is not None
        and hasattr(base, "layers")
        and hasattr(base, "rotary_emb")
        and get_out is not None
        and isinstance(get_out(), nn.Linear)
    )


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class StaticDecoder:
    """See the module doc. One instance per (batch, cache length); not thread-safe."""

    def __init__(
        self,
        model: nn.Module,
        *,
        batch: int,
        cache_len: int,
        temperature: float,
        top_p: float,
        mode: DecodeMode = "eager",
    ) -> None:
        if not supports_static(model):
            raise ValueError(f"static decoding does not support {type(model).__name__}")
        if temperature <= 0:
            raise ValueError("temperature must be > 0")
        param = next(model.parameters())
        self.device = param.device
        if mode in ("graph", "inductor-graph") and self.device.type != "cuda":
            raise ValueError(f"decode mode {mode!r} needs a CUDA device")
        self.model = model
        self.base: Any = cast(Any, model).model
        cfg = cast(Any, model).config
        self.batch, self.cache_len, self.mode = batch, cache_len, mode
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads)
        self.groups = self.heads // self.kv_heads
        dtype = self.base.embed_tokens.weight.dtype
        shape = (batch, self.kv_heads, cache_len, self.head_dim)
        dev = self.device
        self.keys = [torch.zeros(shape, dtype=dtype, device=dev) for _ in self.base.layers]
        self.values = [torch.zeros(shape, dtype=dtype, device=dev) for _ in self.base.layers]
        self.valid = torch.zeros((batch, cache_len), dtype=torch.bool, device=dev)
        self.slots = torch.arange(cache_len, device=dev)
        self.pos_offset = torch.zeros(batch, dtype=torch.long, device=dev)  # position = slot + offset
        # Inputs of the decode step (static addresses: written in place before every step).
        self.feed = torch.zeros(batch, dtype=torch.long, device=dev)
        self.slot = torch.zeros(1, dtype=torch.long, device=dev)
        self.uniforms = torch.zeros(batch, dtype=torch.float32, device=dev)
        head = cast(Any, model).get_output_embeddings()
        self.head: nn.Linear = head
        self._head_w32: Tensor | None = None
        if isinstance(head, FP32LMHead) and head.operands == torch.float32 and head.weight.dtype != torch.float32:
            self._head_w32 = head.weight.detach().float()  # refreshed in place by refresh()
        self._step_fn: Any = self._decode
        if mode in ("inductor", "inductor-graph"):
            self._step_fn = torch.compile(self._decode, fullgraph=False, dynamic=False)
        self._graph: Any = None
        self._graph_out: tuple[Tensor, Tensor, Tensor] | None = None
        if mode in ("graph", "inductor-graph"):
            self._capture()

    # -- weights ----------------------------------------------------------------------------------------------

    def refresh(self) -> None:
        """After an in-place weight load: update the float32 copy of a reduced-precision FP32 head (in place)."""
        if self._head_w32 is not None:
            with torch.inference_mode():  # the buffer may be an inference tensor (built inside generate)
                self._head_w32.copy_(self.head.weight)

    # -- the model --------------------------------------------------------------------------------------------

    def _logits(self, hidden: Tensor) -> Tensor:
        head = self.head
        if isinstance(head, FP32LMHead):
            bias = head.bias.float() if head.bias is not None else None
            if head.operands != torch.float32:
                out = _mm_float_out(hidden.to(head.operands), head.weight.to(head.operands).t())
            else:
                weight = self._head_w32 if self._head_w32 is not None else head.weight
                out = hidden.float() @ weight.t()
            return out if bias is None else out + bias
        return cast(Tensor, head(hidden)).float()

    def _layers(self, x: Tensor, positions: Tensor, slots: Tensor, mask: Tensor) -> Tensor:
        """x [B, T, H] at ``positions`` [B, T], written to cache ``slots`` [T]; mask [B, 1, T, S] (True = attend)
        over the first S slots of the cache (S = L in compiled modes; eager decoding attends to a bucketed prefix)."""
        span = mask.shape[-1]
        b, t, _ = x.shape
        cos, sin = self.base.rotary_emb(x, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        g, kvh, hd = self.groups, self.kv_heads, self.head_dim
        # GQA without repeating the cache: the g query heads of one kv head become g*T query rows.
        gmask = mask if g == 1 or t == 1 else mask.repeat(1, 1, g, 1)
        for i, layer in enumerate(self.base.layers):
            attn = layer.self_attn
            h = layer.input_layernorm(x)
            q = attn.q_proj(h).view(b, t, -1, hd).transpose(1, 2)
            k = attn.k_proj(h).view(b, t, -1, hd).transpose(1, 2)
            v = attn.v_proj(h).view(b, t, -1, hd).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            self.keys[i].index_copy_(2, slots, k.to(self.keys[i].dtype))
            self.values[i].index_copy_(2, slots, v.to(self.values[i].dtype))
            q = q.reshape(b, kvh, g * t, hd)
            keys, values = self.keys[i], self.values[i]
            if span != self.cache_len:
                keys, values = keys[:, :, :span], values[:, :, :span]
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=gmask)
            o = o.reshape(b, kvh * g, t, hd).transpose(1, 2).reshape(b, t, kvh * g * hd)
            x = x + attn.o_proj(o)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return cast(Tensor, self.base.norm(x))

    def _decode(self, span: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
        slot = self.slot
        span = self.cache_len if span is None else span
        positions = (self.pos_offset + slot).unsqueeze(1)
        x = self.base.embed_tokens(self.feed.unsqueeze(1))
        mask = (self.valid[:, :span] & (self.slots[:span] <= slot)).view(self.batch, 1, 1, span)
        hidden = self._layers(x, positions, slot, mask)[:, -1]
        logits = self._logits(hidden)
        tokens, logps = sample_with_uniforms(logits, self.uniforms, temperature=self.temperature, top_p=self.top_p)
        return tokens, logps, logits

    def _capture(self) -> None:
        """Warm up (compiles in inductor mode) on a side stream, then capture one decode step. The warm-up writes
        junk at the last slot, which is harmless: a slot is always written before it is attended to."""
        self.slot.fill_(self.cache_len - 1)
        self.valid.fill_(True)
        stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(3):
                self._step_fn()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._graph_out = self._step_fn()
        self._graph = graph

    # -- public -----------------------------------------------------------------------------------------------

    def prefill(self, ids: Tensor, attn: Tensor) -> Tensor:
        """Left-padded prompts ``ids``/``attn`` [B, W] into slots 0..W-1 (eager); float32 logits [B, V] of the last
        position. Resets the cache's visibility for a new batch."""
        b, w = ids.shape
        if b != self.batch or w >= self.cache_len:
            raise ValueError(f"prefill of {tuple(ids.shape)} does not fit batch {self.batch}, cache {self.cache_len}")
        attn = attn.to(self.device).bool()
        self.valid.fill_(True)
        self.valid[:, :w] = attn
        lengths = attn.long().sum(-1)
        positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
        self.pos_offset.copy_(lengths - w)
        slots = self.slots[:w]
        causal = slots.view(1, w) <= slots.view(w, 1)  # [T, L'] query t sees slots <= t
        mask = (attn.view(b, 1, w) & causal.view(1, w, w)) | torch.eye(w, dtype=torch.bool, device=self.device)
        full = mask.view(b, 1, w, w)
        x = self.base.embed_tokens(ids.to(self.device))
        hidden = self._layers(x, positions, slots, full)[:, -1]
        return self._logits(hidden)

    def step(self, feed: Tensor, slot: int, uniforms: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One decode step: row b feeds ``feed[b]`` at cache slot ``slot``; (tokens, logprobs, float32 logits) [B],
        [B], [B, V] sampled with ``uniforms`` [B]. The returned tensors are overwritten by the next step."""
        if not 0 <= slot < self.cache_len:
            raise ValueError(f"slot {slot} outside the cache (length {self.cache_len})")
        self.feed.copy_(feed, non_blocking=True)
        self.slot.fill_(slot)
        self.uniforms.copy_(uniforms)
        if self._graph is not None:
            self._graph.replay()
            assert self._graph_out is not None
            return self._graph_out
        if self.mode == "eager":  # attend to the written prefix only, bucketed (few shapes, no compile to upset)
            return self._decode(min(self.cache_len, bucket(slot + 1, 32)))
        return cast(tuple[Tensor, Tensor, Tensor], self._step_fn())
