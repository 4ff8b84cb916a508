"""The generator side of the CUDA IPC test, importable by a spawned process."""

from __future__ import annotations

from typing import Any

import torch

from rl_core.engine.weights import SharedWeights


def read_versions(shared: SharedWeights, go: Any, back: Any) -> None:
    """Per request: ``read_into`` a CUDA staging copy, send back (version, every tensor on the CPU)."""
    try:
        staging = {k: torch.empty_like(v) for k, v in shared.tensors.items()}
        back.put(("ready", {k: str(v.device) for k, v in shared.tensors.items()}))
        while go.get() is not None:
            version = shared.read_into(staging)
            back.put(("ok", version, {k: v.to("cpu", copy=True) for k, v in staging.items()}))
    except BaseException as exc:  # reported, not swallowed: the parent fails with it
        back.put(("error", f"{type(exc).__name__}: {exc}"))
        raise
