"""Which schedule a run executes, given where its trainer and generators run.

PipelineRL-k and PPO-off-policy-k overlap generation with training. That pays only when the two do not compete for
one device: on one colocated GPU the generator's back-to-back CUDA-graph replays slowed the trainer's step from 2.77
to 5.49 s and PipelineRL-8 ran at 0.83x ``sync`` (docs/benchmarks.md). So when any generator shares the
trainer's CUDA device, a run asking for an overlapping schedule executes ``sync`` instead and says so (the engine
prints ``ScheduleChoice.note`` to stderr, the run's log). On a CPU, or with every generator on its own GPU, the
recipe's schedule runs unchanged. ``torch_threads`` gives each process its torch threads from the same choice.

Invariants: the choice is a pure function of the recipe's policy and the device names; it never turns ``sync`` into
anything else; the used policy is ``sync`` (k = 1) or the requested one, nothing in between.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rl_core.engine.admission import AdmissionPolicy


@dataclass(frozen=True)
class ScheduleChoice:
    requested: AdmissionPolicy
    used: AdmissionPolicy
    note: str | None  # why ``used`` differs from ``requested``; None when it does not

    @property
    def changed(self) -> bool:
        return self.used != self.requested


def cuda_index(device: str) -> int | None:
    """The CUDA device index of a device name (``cuda`` is ``cuda:0``); None for any other device."""
    name = device.strip().lower()
    if name == "cuda":
        return 0
    if name.startswith("cuda:") and name[5:].isdigit():
        return int(name[5:])
    return None


def shared_gpu(trainer_device: str, generator_devices: Sequence[str]) -> int | None:
    """The CUDA index the trainer shares with a generator, or None when none is shared."""
    trainer = cuda_index(trainer_device)
    if trainer is None:
        return None
    return trainer if any(cuda_index(d) == trainer for d in generator_devices) else None


def choose_schedule(
    requested: AdmissionPolicy, trainer_device: str, generator_devices: Sequence[str]
) -> ScheduleChoice:
    """``sync`` when an overlapping schedule would put a generator on the trainer's GPU, else ``requested``."""
    gpu = shared_gpu(trainer_device, generator_devices)
    if requested.mode == "sync" or gpu is None:
        return ScheduleChoice(requested, requested, None)
    note = (
        f"schedule: the recipe asks for {requested.mode} k={requested.k}, but the trainer shares cuda:{gpu} with "
        "a generator, where an overlapping schedule is slower than sync (docs/benchmarks.md); running "
        "sync (on-policy, one batch per step). Put the generator on its own GPU (generator.device) to run "
        f"{requested.mode}."
    )
    return ScheduleChoice(requested, AdmissionPolicy(mode="sync", k=1), note)


def torch_threads(threads: int | Literal["auto"], mode: str, processes: int, cores: int | None = None) -> int:
    """Torch threads for each of the run's processes: ``threads`` as given, or for ``auto`` every core when the
    trainer and the generators take turns (``sync``: one batch at a time, so one process works at once), else the
    cores split between the trainer and its ``processes`` generators (at least 1). Measured on the 2-core VM
    (bench/engine_side_by_side.py, 2026-11-29): sync 0.78 -> 0.56 s/step with 2 threads; PipelineRL-8 0.42 s/step
    with 1 thread each and 1.46 with 2 each (two processes spinning four threads on two cores)."""
    if threads != "auto":
        return threads
    available = cores if cores is not None else len(os.sched_getaffinity(0))
    if mode == "sync":
        return max(1, available)
    return max(1, available // (1 + processes))
