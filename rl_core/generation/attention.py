"""Which scaled-dot-product attention kernels decoding may use.

Decoding grows the KV cache by one position per step, so every step calls attention with a new key length. On an
H100 with torch 2.11 the default SDPA dispatch picks cuDNN's fused attention for the generator's masked calls,
and cuDNN builds an execution plan per new shape: ``bench/gpu_profile.py`` measured 2.7 ms of host time per call
(8.1 s of 12.5 s for 128 batch-1 tokens of the 0.5B shape; docs/benchmarks.md, "GPU path"), about 85% of the
generator's wall time, while the GPU kernels themselves took 4.5 us. Flash and memory-efficient attention have no
per-shape plan, so decoding excludes cuDNN and lets SDPA choose among the others.

Invariant: the excluded backend changes speed only; every remaining backend computes the same attention (up to
float rounding), so log-probs keep matching the trainer's (tests/cuda/test_cuda_path.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

#: SDPA backends decoding may use on CUDA (cuDNN left out: a plan build per key length).
DECODE_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


@contextlib.contextmanager
def decode_attention(device: torch.device) -> Iterator[None]:
    """Inside: SDPA never picks cuDNN attention on a CUDA ``device``; a no-op on other devices."""
    if device.type != "cuda":
        yield
        return
    with sdpa_kernel(list(DECODE_BACKENDS)):
        yield
