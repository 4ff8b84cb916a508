"""Data-parallel trainer ranks: the engine process is rank 0, ``trainer.ranks - 1`` spawned followers mirror it.

Every trainer operation that involves a collective (a step's gradient reduction, ZeRO-3's parameter gathers for
evaluation and weight sync, DeepSpeed's sharded checkpoints) must run on all ranks in the same order. Rank 0's
``TrainerGroup`` therefore broadcasts each operation (``step`` with its batch, ``weights``, ``weight_items``,
``save``, ``load``, ``stop``) over the default process group before running it itself; each follower loops on
those commands and runs the same operation on its own ``DeepSpeedTrainer``. Only rank 0 talks to the generator.

Devices: on CUDA, rank r uses GPU ``index(device) + r`` (``device: cuda:1`` with 3 ranks: GPUs 1, 2, 3); on the
CPU every rank is a CPU process (what the tests run, over gloo).

Invariants: followers build the same model from the same config (same initial weights; DeepSpeed also broadcasts
rank 0's at start); a follower that fails exits, and rank 0 fails at its next collective within the process
group's timeout instead of hanging forever; ``close`` stops the followers and joins them.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor, nn

from rl_core.contracts.run_config import RunConfig, device_sequence
from rl_core.engine.batch import TrainBatch
from rl_core.engine.ports import free_port
from rl_core.engine.schedule import torch_threads
from rl_core.engine.trainer import StepStats
from rl_core.engine.trainer_deepspeed import DeepSpeedTrainer, Ranks
from rl_core.models import ModelConfig

__all__ = ["TrainerGroup", "rank_device"]


def rank_device(device: str, rank: int) -> torch.device:
    """The device of trainer rank ``rank`` when rank 0 is on ``device``."""
    return torch.device(device_sequence(device, rank + 1)[rank])


@dataclass(frozen=True)
class _FollowerSpec:
    cfg: RunConfig
    model_cfg: ModelConfig
    ranks: Ranks
    version: int


def _broadcast(command: tuple[str, Any]) -> tuple[str, Any]:
    box: list[Any] = [command]
    dist.broadcast_object_list(box, src=0)
    return tuple(box[0])


def _build(cfg: RunConfig, model_cfg: ModelConfig, model: nn.Module, ranks: Ranks, version: int) -> DeepSpeedTrainer:
    return DeepSpeedTrainer(
        model,
        cfg.recipe,
        device=rank_device(cfg.device, ranks.rank),
        zero_stage=cfg.trainer.zero_stage,
        micro_batch_size=cfg.trainer.micro_batch_size,
        version=version,
        ranks=ranks,
    )


def follower_main(spec: _FollowerSpec) -> None:
    """A follower rank's process: build the trainer, then run rank 0's commands until ``stop``."""
    from rl_core.engine.models import build_trainer_model

    try:
        torch.set_num_threads(torch_threads(spec.cfg.threads, "pipeline", spec.cfg.trainer.ranks))
        torch.manual_seed(spec.cfg.seed)
        model, _ = build_trainer_model(spec.cfg, spec.model_cfg, device=rank_device(spec.cfg.device, spec.ranks.rank))
        trainer = _build(spec.cfg, spec.model_cfg, model, spec.ranks, spec.version)
        while True:
            name, payload = _broadcast(("", None))
            if name == "stop":
                return
            if name == "step":
                trainer.step(payload)
            elif name == "weights":
                trainer.weights()
            elif name == "weight_items":
                for _ in trainer.weight_items():
                    pass
            elif name == "save":
                trainer.save(payload)
            elif name == "load":
                trainer.load(payload)
            else:
                raise ValueError(f"unknown trainer command {name!r}")
    except BaseException:
        traceback.print_exc()
        raise


class TrainerGroup:
    """Rank 0 of ``cfg.trainer.ranks`` DeepSpeed ranks, with the ``Trainer`` interface (see module doc)."""

    def __init__(self, cfg: RunConfig, model_cfg: ModelConfig, model: nn.Module, *, version: int = 0) -> None:
        world = cfg.trainer.ranks
        if world < 2:
            raise ValueError("TrainerGroup needs trainer.ranks >= 2 (one rank is a plain DeepSpeedTrainer)")
        init_method = f"tcp://127.0.0.1:{free_port()}"
        timeout = cfg.trainer.collective_timeout_s
        ctx = mp.get_context("spawn")
        self._procs = []
        for rank in range(1, world):
            ranks = Ranks(rank=rank, world_size=world, init_method=init_method, timeout_s=timeout)
            proc = ctx.Process(target=follower_main, args=(_FollowerSpec(cfg, model_cfg, ranks, version),), daemon=True)
            proc.start()
            self._procs.append(proc)
        ranks = Ranks(rank=0, world_size=world, init_method=init_method, timeout_s=timeout)
        self.local = _build(cfg, model_cfg, model, ranks, version)
        self.model = self.local.model
        self._closed = False

    @property
    def version(self) -> int:
        return self.local.version

    @version.setter
    def version(self, value: int) -> None:
        self.local.version = value

    def _check_followers(self) -> None:
        dead = [p.exitcode for p in self._procs if not p.is_alive()]
        if dead:
            raise RuntimeError(f"{len(dead)} trainer rank(s) exited (exit codes {dead}); see the engine log")

    def _command(self, name: str, payload: Any = None) -> None:
        self._check_followers()
        _broadcast((name, payload))

    def step(self, batch: TrainBatch) -> StepStats:
        self._command("step", batch)
        return self.local.step(batch)

    def weights(self) -> dict[str, Tensor]:
        self._command("weights")
        return self.local.weights()

    def weight_items(self) -> Iterator[tuple[str, Tensor]]:
        self._command("weight_items")
        yield from self.local.weight_items()

    def save(self, directory: str) -> None:
        self._command("save", directory)
        self.local.save(directory)

    def load(self, directory: str) -> None:
        self._command("load", directory)
        self.local.load(directory)

    def close(self) -> None:
        """Stop and join the followers (idempotent; best effort when one already died)."""
        if self._closed:
            return
        self._closed = True
        try:
            if all(p.is_alive() for p in self._procs):
                _broadcast(("stop", None))
        finally:
            for p in self._procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
