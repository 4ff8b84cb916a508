"""Matmuls with float32 accumulation and output on reduced-precision operands, and error-compensated float32 matmuls.

``compensated_mm(a, b, scheme)`` is ``a @ b`` for float32 ``a``, ``b`` computed from bfloat16 pieces, so a GPU runs
it on tensor cores instead of at the float32 SIMT rate:

- ``bfloat16`` (1 piece): both operands rounded to bfloat16, float32 accumulation (the plain tensor-core head).
- ``bf16x3`` (2 pieces): ``x = hi + lo`` with ``hi = bf16(x)``, ``lo = bf16(x - hi)`` (16 significant bits), products
  hi·hi + hi·lo + lo·hi.
- ``bf16x6`` (3 pieces: ``x = p0 + p1 + p2`` exactly, as float32 has 24 significant bits), the six products whose
  pieces' ranks sum to at most 2 (p1·p1, p2·p0, p0·p2, p1·p0, p0·p1, p0·p0); the dropped ones are ~2^-27 relative,
  below float32 rounding. Measured against float64 it is as accurate as a float32 matmul or better.

Every scheme is one matmul: the pieces are concatenated along the contracted dimension (``a' = [a_i ...]``,
``b' = [b_j ...]`` in matching order), so ``a' @ b' = sum_k a_ik @ b_jk`` is accumulated in float32 by a single
tensor-core GEMM (or one float32 GEMM of the exactly representable pieces on a CPU, where products of bfloat16
numbers are exact in float32). Invariants: the pieces of ``x`` sum to ``x`` up to the scheme's significant bits;
bfloat16 has float32's exponent range, so no piece overflows; the result is float32.
"""

from __future__ import annotations

import warnings
from typing import Literal

import torch
from torch import Tensor

Scheme = Literal["float32", "bfloat16", "bf16x3", "bf16x6"]

#: scheme -> the (piece of a, piece of b) products it sums, smallest first: the GEMM accumulates along the contracted
#: dimension in order, so the small products are summed before the large ones can swamp their bits (largest first
#: measured 2-4x less accurate, worse than a float32 matmul)
PRODUCTS: dict[str, tuple[tuple[int, int], ...]] = {
    "bfloat16": ((0, 0),),
    "bf16x3": ((1, 0), (0, 1), (0, 0)),
    "bf16x6": ((1, 1), (2, 0), (0, 2), (1, 0), (0, 1), (0, 0)),
}

_OUT_DTYPE_MM: dict[str, bool] = {}  # device type -> whether torch.mm(..., out_dtype=float32) works there


def _out_dtype_mm(a: Tensor, b: Tensor) -> Tensor | None:
    """``torch.mm(a, b, out_dtype=float32)`` (one tensor-core matmul) where this device supports it, else None."""
    kind = a.device.type
    if a.dtype == torch.float32 or not _OUT_DTYPE_MM.get(kind, kind == "cuda"):
        return None
    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except (RuntimeError, TypeError, NotImplementedError) as exc:  # this torch build lacks the op there
        _OUT_DTYPE_MM[kind] = False
        warnings.warn(
            f"torch.mm(..., out_dtype=float32) is unavailable on {kind} ({type(exc).__name__}: {exc}); "
            "a matmul of reduced-precision operands falls back to a float32 matmul: same numbers, float32 speed",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def mm_float_out(a: Tensor, b: Tensor, blocks: int = 1) -> Tensor:
    """``a @ b`` with float32 accumulation and output, for reduced-precision ``a``, ``b``: one tensor-core matmul
    where ``out_dtype`` is supported, else float32 matmuls of the (exactly representable) operands, ``blocks``
    equal slices of the contracted dimension in order (one float32 copy of a slice at a time, not of all)."""
    out = _out_dtype_mm(a, b)
    if out is not None:
        return out
    if blocks <= 1:
        return torch.mm(a.float(), b.float())
    step = a.shape[1] // blocks
    acc = torch.mm(a[:, :step].float(), b[:step].float())
    for k in range(step, a.shape[1], step):
        acc.addmm_(a[:, k : k + step].float(), b[k : k + step].float())
    return acc


def pieces(x: Tensor, count: int) -> list[Tensor]:
    """``count`` bfloat16 tensors whose float32 sum is ``x`` to ``8 * count`` significant bits (largest first)."""
    rest = x.float()
    out: list[Tensor] = []
    for i in range(count):
        piece = rest.to(torch.bfloat16)
        out.append(piece)
        if i + 1 < count:
            rest = rest - piece.float()
    return out


def piece_count(scheme: Scheme) -> int:
    return 1 + max(max(p) for p in PRODUCTS[scheme])


def split_operand(x: Tensor, scheme: Scheme, side: int, dim: int) -> Tensor:
    """The bfloat16 pieces of ``x`` concatenated along ``dim`` in the order ``PRODUCTS[scheme]`` pairs them; ``side``
    0 for the left operand, 1 for the right. Reusable across matmuls (e.g. a weight split once per step)."""
    parts = pieces(x, piece_count(scheme))
    order = [pair[side] for pair in PRODUCTS[scheme]]
    return parts[0] if len(order) == 1 else torch.cat([parts[i] for i in order], dim=dim)


def split_mm(a_split: Tensor, b_split: Tensor, scheme: Scheme) -> Tensor:
    """``a @ b`` from operands already split along the contracted dimension (``split_operand``); float32."""
    return mm_float_out(a_split, b_split, len(PRODUCTS[scheme]))


def compensated_mm(a: Tensor, b: Tensor, scheme: Scheme) -> Tensor:
    """``a @ b`` ([M, K] @ [K, N]) in float32 by ``scheme`` (module doc); ``float32`` is a plain float32 matmul."""
    if scheme == "float32":
        return torch.mm(a.float(), b.float())
    if a.dtype == b.dtype == torch.bfloat16:  # one piece each: every scheme is this one exact product
        return mm_float_out(a, b)
    return split_mm(split_operand(a, scheme, 0, 1), split_operand(b, scheme, 1, 0), scheme)
