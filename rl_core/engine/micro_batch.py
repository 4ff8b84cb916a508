"""Micro-batches sized from free memory: how many rows of a step's batch one forward/backward may hold, and
whether activation checkpointing is needed at all.

``activation_bytes_per_token`` estimates what the backward keeps per token of a Llama/Qwen2 decoder trained with
float32 master weights under bf16 autocast and SDPA attention (no T x T scores kept): per layer the float32 residual
stream and RMSNorm inputs/outputs (~16 h bytes), the bf16 projection inputs and outputs, rotary and attention
tensors (~16 h + 12 kv bytes) and the SwiGLU MLP's five bf16 tensors of the intermediate width (10 i bytes); with
activation checkpointing only each layer's float32 input (4 h) stays, plus one layer recomputed at a time.
``plan_micro_batch`` divides the usable free memory by a row's bytes.

Invariants (pure functions; ``free_bytes`` is the one device query): rows never exceed the batch's rows and are at
least 1; checkpointing is chosen only when not even one row fits without it (recomputing the forward costs ~1/3
more compute, and a single row of a long sequence already fills the GPU); more free memory never turns
checkpointing on nor gives fewer rows under the same choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Shape:
    """What sets a decoder's activation memory (a Hugging Face config's numbers)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int


@dataclass(frozen=True)
class MicroBatchPlan:
    rows: int
    checkpointing: bool
    bytes_per_row: int  # the estimate the rows were computed from
    fits: bool  # False: even one checkpointed row exceeds the usable memory (the step will likely run out)


def layer_bytes_per_token(shape: Shape) -> int:
    """Bytes one decoder layer keeps for backward per token, without checkpointing (module doc)."""
    kv = shape.hidden * shape.kv_heads // shape.heads
    return 32 * shape.hidden + 12 * kv + 10 * shape.intermediate


def activation_bytes_per_token(shape: Shape, *, checkpointing: bool = False) -> int:
    """Bytes per token kept for backward by the whole body (embedding output and final norm included)."""
    outer = 12 * shape.hidden  # embedding output, final RMSNorm input and output (float32)
    if checkpointing:
        return outer + 4 * shape.hidden * shape.layers + layer_bytes_per_token(shape)
    return outer + layer_bytes_per_token(shape) * shape.layers


def head_chunk_bytes(shape: Shape, chunk_tokens: int) -> int:
    """Transient bytes of the fused head per chunk: its float32 logits, turned into their gradient in place (4 bytes
    per logit), and for a compensated head the gradient's bf16 pieces side by side (12) and the float32 remainders
    the split leaves (8); 24 bytes per logit, whatever the scheme (an upper bound for float32)."""
    return 24 * chunk_tokens * shape.vocab


def plan_micro_batch(
    free_bytes: int,
    shape: Shape,
    *,
    sequence: int,
    batch_rows: int,
    chunk_tokens: int,
    headroom: float = 0.8,
) -> MicroBatchPlan:
    """The most rows per micro-batch that fit in ``headroom`` of ``free_bytes`` (module doc)."""
    if batch_rows < 1 or sequence < 1:
        raise ValueError(f"need batch_rows >= 1 and sequence >= 1, got {batch_rows}, {sequence}")
    head = head_chunk_bytes(shape, min(chunk_tokens, batch_rows * sequence))
    usable = max(0, int(free_bytes * headroom) - head)
    plain = activation_bytes_per_token(shape) * sequence
    if usable >= plain:
        return MicroBatchPlan(min(batch_rows, usable // plain), False, plain, True)
    ckpt = activation_bytes_per_token(shape, checkpointing=True) * sequence
    return MicroBatchPlan(max(1, min(batch_rows, usable // ckpt)), True, ckpt, usable >= ckpt)


def shape_of(config: Any) -> Shape:
    """The ``Shape`` of a Hugging Face Llama/Qwen2 config."""
    heads = int(config.num_attention_heads)
    return Shape(
        hidden=int(config.hidden_size),
        intermediate=int(config.intermediate_size),
        layers=int(config.num_hidden_layers),
        heads=heads,
        kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
        vocab=int(config.vocab_size),
    )


def free_bytes(device: torch.device) -> int:
    """Memory a step may still allocate on ``device``: free CUDA memory plus what the caching allocator holds
    unused; on the CPU the kernel's MemAvailable."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable in /proc/meminfo")
