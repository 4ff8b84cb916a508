"""In-place weight loading for in-flight updates (PipelineRL): no re-allocation, the KV cache is untouched.

Invariants: every tensor keeps its storage (``data_ptr`` unchanged), dtype and device; values are cast and
copied; tied parameters (one Parameter under two names) are written consistently; a partial mapping updates
only the named tensors. Unknown names or shape mismatches raise before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

__all__ = ["WeightLoader"]


class WeightLoader:
    """Copies named tensors into a model's parameters and persistent buffers in place."""

    def __init__(self, model: nn.Module) -> None:
        self._targets: dict[str, Tensor] = dict(model.named_parameters(remove_duplicate=False))
        for name, buf in model.named_buffers(remove_duplicate=False):
            self._targets.setdefault(name, buf)

    @property
    def names(self) -> list[str]:
        """Every name the loader accepts (state-dict names, tied aliases included)."""
        return list(self._targets)

    def load(self, state: Mapping[str, Tensor]) -> int:
        """Copy ``state`` into the model; returns the number of tensors written."""
        problems: list[str] = []
        for name, src in state.items():
            dst = self._targets.get(name)
            if dst is None:
                problems.append(f"unknown weight {name!r}")
            elif tuple(dst.shape) != tuple(src.shape):
                problems.append(f"{name}: shape {tuple(src.shape)} != model's {tuple(dst.shape)}")
        if problems:
            raise ValueError("cannot load weights: " + "; ".join(problems[:5]))
        with torch.no_grad():
            for name, src in state.items():
                self._targets[name].copy_(src)
        return len(state)
