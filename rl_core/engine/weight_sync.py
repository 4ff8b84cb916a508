"""Choosing and wiring the trainer -> generator weight transport from the run config (the layout).

Layouts: the trainer runs on ``device``, the generator on ``generator.device`` (default: the same device, i.e.
colocated). ``weight_sync.transport``:

- ``shared_memory``: host shared memory (``SharedWeights`` on CPU). Any layout on one machine.
- ``cuda_ipc``: ``SharedWeights`` on a GPU (the generator's, else the trainer's), mapped into the generator
  process through CUDA IPC: publishes and reads are device copies. One machine, at least one GPU.
- ``nccl`` / ``gloo``: ``CollectiveWeights``, bucketed broadcasts with a timeout (NCCL needs two different
  GPUs; gloo works anywhere and is what the CPU tests run).
- ``auto``: ``shared_memory`` when both sides are on the CPU, else ``cuda_ipc``.

The shared copy is in the generator's dtype (``recipe.precision.generator_dtype``): exactly what the generator's
model holds (its FP32 head upcasts the stored weight), at half the bytes of float32 master weights for bf16.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import torch
from torch import Tensor

from rl_core.contracts.run_config import RunConfig
from rl_core.engine.collective import CollectiveWeights
from rl_core.engine.ports import free_port
from rl_core.engine.weights import SharedWeights
from rl_core.models.build import torch_dtype

__all__ = ["WeightChannel", "make_channel", "resolve_transport", "staging_for"]


class WeightChannel(Protocol):
    """The interface both transports share (trainer side: ``publish``; generator side: ``version``, ``read_into``)."""

    @property
    def version(self) -> int: ...

    @property
    def tensors(self) -> Mapping[str, Tensor]: ...

    def publish(self, state: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]], version: int) -> None: ...

    def read_into(self, target: Mapping[str, Tensor]) -> int: ...


def resolve_transport(cfg: RunConfig) -> str:
    """The concrete transport of ``weight_sync.transport`` (``auto`` resolved)."""
    transport = cfg.weight_sync.transport
    if transport != "auto":
        return transport
    on_cpu = cfg.device == "cpu" and cfg.generator_devices()[0] == "cpu"
    return "shared_memory" if on_cpu else "cuda_ipc"


def make_channel(cfg: RunConfig, state: Mapping[str, Tensor], version: int) -> SharedWeights | CollectiveWeights:
    """The trainer-side channel for ``cfg``'s layout. A ``CollectiveWeights`` still has to be connected: the
    generator process calls ``connect_receiver`` and the trainer ``connect_sender`` once that process started."""
    dtype = torch_dtype(cfg.recipe.precision.generator_dtype)
    sync = cfg.weight_sync
    transport = resolve_transport(cfg)
    if transport == "shared_memory":
        return SharedWeights(state, version=version, device="cpu", dtype=dtype, timeout_s=sync.timeout_s)
    if transport == "cuda_ipc":
        gen = cfg.generator_devices()[0]  # the first generator's GPU; further ones read it through peer access
        where = gen if gen != "cpu" else cfg.device
        return SharedWeights(state, version=version, device=where, dtype=dtype, timeout_s=sync.timeout_s)
    init_method = sync.init_method or f"tcp://127.0.0.1:{free_port()}"
    return CollectiveWeights(
        state,
        init_method=init_method,
        backend=transport,
        bucket_mb=sync.bucket_mb,
        timeout_s=sync.timeout_s,
        version=version,
        dtype=dtype,
        receivers=cfg.generator.processes,
    )


def staging_for(channel: WeightChannel, device: torch.device | str) -> dict[str, Tensor]:
    """Buffers on the generator's device that a read lands in before the model loads them."""
    return {k: torch.empty_like(v, device=device) for k, v in channel.tensors.items()}
