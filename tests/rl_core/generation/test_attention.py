"""Decoding's SDPA backends: cuDNN attention is excluded on CUDA only (rl_core/generation/attention.py)."""

from __future__ import annotations

import torch

from rl_core.generation.attention import decode_attention


def _enabled() -> tuple[bool, bool, bool, bool]:
    b = torch.backends.cuda
    return b.cudnn_sdp_enabled(), b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(), b.math_sdp_enabled()


def test_decode_attention_leaves_out_cudnn_on_cuda_and_restores_the_settings() -> None:
    before = _enabled()
    with decode_attention(torch.device("cuda", 0)):
        assert _enabled() == (False, True, True, True)
    assert _enabled() == before


def test_decode_attention_changes_nothing_on_the_cpu() -> None:
    before = _enabled()
    with decode_attention(torch.device("cpu")):
        assert _enabled() == before
