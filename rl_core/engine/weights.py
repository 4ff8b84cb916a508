"""Publishing the trainer's weights to the generator process: shared-memory tensors plus a version counter.

The trainer owns one shared-memory copy of every floating-point entry of the model's state dict (created once,
in the trainer's dtype unless ``dtype`` is given, on ``device``) and, after each optimiser step, copies its
weights in and bumps ``version`` under an inter-process lock. The generator polls ``version`` (one shared
integer read, no lock) between decode steps and, when it moved, copies the tensors into its own model under the
same lock. Both lock acquisitions give up after ``timeout_s`` with ``WeightSyncError`` (a peer died holding it).

Invariants:
- A reader never sees a torn update: ``publish`` and ``read_into`` hold the same lock, and ``version`` changes
  only inside ``publish`` after every tensor was written (on a GPU: after the device synchronised, since CUDA
  copies are asynchronous; ``read_into`` likewise synchronises before it releases the lock).
- ``read_into`` returns the version of exactly the weights it copied.
- Only tensors are shared; nothing is pickled per update, so a publish costs one memcpy of the model (measured
  against a pipe of state dicts in ``bench/weight_publish.py``).

Where the shared copy lives (``device``): host memory by default (a CUDA trainer or generator copies
device<->host; ``copy_`` handles dtype and device); on a CUDA device (``device="cuda:N"``) the copy stays on that
GPU and the spawned process maps it through CUDA IPC, so a publish and a read are device-to-device copies (the
colocated layout, and separate GPUs of one machine through peer access). Across machines use
``rl_core.engine.collective.CollectiveWeights`` (bucketed NCCL/gloo broadcast).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
import torch.multiprocessing as mp
from torch import Tensor


class WeightSyncError(RuntimeError):
    """A weight publish or read did not complete (timeout, a dead peer, a broken channel)."""


def items_of(state: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]]) -> Iterator[tuple[str, Tensor]]:
    """(name, tensor) pairs of a state dict or of an iterator of pairs (e.g. ZeRO-3 gathering one at a time)."""
    if isinstance(state, Mapping):
        return iter(state.items())
    return iter(state)


def publishable(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The entries of a state dict that are weights (floating-point tensors); buffers such as rotary caches of
    integer dtype or non-persistent ones are left out."""
    return {k: v for k, v in state.items() if isinstance(v, Tensor) and v.is_floating_point()}


def _shared(t: Tensor, device: torch.device) -> Tensor:
    out = t.detach().to(device, copy=True).contiguous()
    if device.type == "cpu":
        out.share_memory_()  # type: ignore[no-untyped-call]
    # CUDA tensors need nothing here: torch.multiprocessing passes them to spawned processes as CUDA IPC handles.
    return out


def _finish_copies(tensors: Iterable[Tensor]) -> None:
    """Wait for the CUDA copies into or out of ``tensors`` (no-op on the CPU, where ``copy_`` is synchronous)."""
    devices = {t.device for t in tensors if t.device.type == "cuda"}
    for device in devices:
        torch.cuda.synchronize(device)


class SharedWeights:
    """Shared-memory weights + version; pass the object to a spawned process as an argument (see module doc)."""

    def __init__(
        self,
        state: Mapping[str, Tensor],
        *,
        version: int = 0,
        ctx: Any = None,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        context = ctx if ctx is not None else mp.get_context("spawn")
        dev = torch.device(device)
        self.device = dev
        self.tensors: dict[str, Tensor] = {
            k: _shared(v if dtype is None else v.to(dtype), dev) for k, v in publishable(state).items()
        }
        self._version = context.Value("q", version, lock=False)
        self._lock = context.Lock()
        self.timeout_s = float(timeout_s)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if not self._lock.acquire(timeout=self.timeout_s):
            raise WeightSyncError(f"weight lock not acquired within {self.timeout_s:g} s (a peer died holding it?)")
        try:
            yield
        finally:
            self._lock.release()

    @property
    def version(self) -> int:
        """The version of the latest complete publish (lock-free read of an aligned 64-bit integer)."""
        return int(self._version.value)

    def publish(self, state: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]], version: int) -> None:
        """Copy ``state``'s weights in and set ``version`` (must not go backwards). ``state`` may be an iterator of
        (name, tensor) pairs, each valid only until the next (ZeRO-3 gathers one parameter at a time)."""
        with self._locked(), torch.no_grad():
            if version < self._version.value:
                raise ValueError(f"version went backwards: {version} < {self._version.value}")
            seen: set[str] = set()
            sources: dict[torch.device, Tensor] = {}
            for name, src in items_of(state):
                dst = self.tensors.get(name)
                if dst is not None:
                    dst.copy_(src)
                    seen.add(name)
                    sources.setdefault(src.device, src)
            missing = self.tensors.keys() - seen
            if missing:
                # The version is not bumped, so readers keep the previous complete weights.
                raise KeyError(f"publish is missing {len(missing)} tensors, e.g. {sorted(missing)[:3]}")
            # CUDA copies are asynchronous (a cross-GPU one on either device): done before the version moves.
            _finish_copies([*self.tensors.values(), *sources.values()])
            self._version.value = version

    def read_into(self, target: Mapping[str, Tensor]) -> int:
        """Copy the shared weights into ``target`` (a model's state dict, tensors updated in place); returns their
        version."""
        with self._locked(), torch.no_grad():
            for name, src in self.tensors.items():
                target[name].copy_(src)
            _finish_copies([*target.values(), *self.tensors.values()])  # before the next publish may overwrite
            return int(self._version.value)

    def numel(self) -> int:
        return sum(t.numel() for t in self.tensors.values())
