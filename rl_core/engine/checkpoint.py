"""Checkpoints: a directory per step, written atomically, with a ``latest`` pointer.

Layout under ``<out>/checkpoints/``::

    step_000040/
        trainer.pt | deepspeed/   weights, optimiser and scheduler (the backend's own format)
        engine.json               step, sampler + curriculum state, compute so far, elapsed wall time, ...
        rng.pt                    python / torch RNG states of the trainer process
    latest                        "step_000040"

The layout's names and ``latest_checkpoint`` are the run directory contract (``rl_core.contracts.run_dir``).

Invariants: a checkpoint directory is complete or absent (written under ``.tmp-step_...`` and renamed; ``latest``
is replaced atomically after the rename), so a process killed at any moment leaves the previous checkpoint
usable. Only the newest ``keep`` checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rl_core.contracts.run_dir import CHECKPOINT_STATE, LATEST


def _step_dir(root: Path, step: int) -> Path:
    return root / f"step_{step:06d}"


def save_checkpoint(
    root: Path, step: int, engine_state: dict[str, Any], save_trainer: Callable[[str], None], *, keep: int = 2
) -> Path:
    """Write checkpoint ``step`` (see module doc); ``save_trainer(dir)`` writes the backend's files."""
    root.mkdir(parents=True, exist_ok=True)
    final = _step_dir(root, step)
    tmp = root / f".tmp-{final.name}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_trainer(str(tmp))
    (tmp / CHECKPOINT_STATE).write_text(json.dumps(engine_state, indent=1), encoding="utf-8")
    torch.save({"python": random.getstate(), "torch": torch.get_rng_state()}, tmp / "rng.pt")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    pointer = root / ".latest.tmp"
    pointer.write_text(final.name, encoding="utf-8")
    os.replace(pointer, root / LATEST)
    for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_engine_state(path: Path) -> dict[str, Any]:
    """The engine state of a checkpoint; restores the trainer process's RNG as a side effect."""
    rng = torch.load(path / "rng.pt", weights_only=False)
    random.setstate(rng["python"])
    torch.set_rng_state(rng["torch"])
    state: dict[str, Any] = json.loads((path / CHECKPOINT_STATE).read_text(encoding="utf-8"))
    return state
