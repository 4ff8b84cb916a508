"""DeepSpeed trainer backend: the shared micro-batch objective under a DeepSpeed engine with a ZeRO stage.

Single-process by default (world size 1, ``gloo`` on CPU, ``nccl`` on CUDA); DeepSpeed's distributed state is set
up with explicit ``init_distributed`` so it never probes MPI. The optimiser is the recipe's torch AdamW and the
schedule the recipe's ``LambdaLR`` (handed to DeepSpeed), so both backends follow the same update rule; DeepSpeed
adds ZeRO partitioning (stage 0-3) and its own gradient clipping at ``optimizer.max_grad_norm``.

Gradient accumulation is driven explicitly: every micro-batch calls ``backward`` with the accumulation boundary
set only on the last one, and the configured ``gradient_accumulation_steps`` is 1, so DeepSpeed never rescales
the loss: the sum of micro-batch losses is the batch loss exactly, as with the torch backend.

On CPU with one rank the shared-memory communication op (a C++ JIT build of ~30 s) is skipped: it only speeds
up collectives between ranks. Ops that are still compiled are cached in ``TORCH_EXTENSIONS_DIR`` (default
``~/.cache/scalerl/torch_extensions``).
"""

from __future__ import annotations

import datetime
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rl_core.algorithms.optim import build_optimizer, build_scheduler
from rl_core.engine.batch import TrainBatch
from rl_core.engine.ports import free_port
from rl_core.engine.trainer import (
    NonFiniteError,
    StepAccumulator,
    StepStats,
    check_finite_weights,
    micro_batch_loss,
    micro_batches,
)
from rl_core.recipe.model import Recipe


@dataclass(frozen=True)
class Ranks:
    """This process's place among the trainer's data-parallel ranks (one per GPU; all ``cpu`` in tests)."""

    rank: int = 0
    world_size: int = 1
    init_method: str | None = None  # tcp://host:port of rank 0's rendezvous; None: a free local port
    timeout_s: float = 1800.0


def init_distributed(device: torch.device, ranks: Ranks = Ranks()) -> None:
    """Initialise torch.distributed for the trainer's ranks (idempotent), without MPI discovery."""
    import deepspeed

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    if device.type == "cuda":
        # DeepSpeed places the engine on cuda:LOCAL_RANK: make that the trainer's GPU (the generator may own
        # another one of this machine, e.g. generator on cuda:0 and trainer on cuda:1).
        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.set_device(index)
        os.environ["LOCAL_RANK"] = str(index)
    else:
        os.environ["LOCAL_RANK"] = str(ranks.rank)
    os.environ["RANK"] = str(ranks.rank)
    os.environ["WORLD_SIZE"] = str(ranks.world_size)
    init_method = ranks.init_method or f"tcp://127.0.0.1:{free_port()}"
    host, port = init_method.removeprefix("tcp://").rsplit(":", 1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = host, port
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "scalerl" / "torch_extensions"))
    if device.type == "cpu":
        # DeepSpeed's shared-memory CPU communication op is a ~30 s C++ JIT build that only speeds up CPU
        # collectives; marking it incompatible makes DeepSpeed use plain torch.distributed/gloo.
        import deepspeed.ops

        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(
        dist_backend="nccl" if device.type == "cuda" else "gloo",
        auto_mpi_discovery=False,
        init_method=init_method,
        rank=ranks.rank,
        world_size=ranks.world_size,
        timeout=datetime.timedelta(seconds=ranks.timeout_s),
    )


def shard(rows: int, ranks: Ranks) -> slice:
    """This rank's contiguous share of ``rows`` batch rows (sizes differ by at most one; may be empty)."""
    base, extra = divmod(rows, ranks.world_size)
    start = ranks.rank * base + min(ranks.rank, extra)
    return slice(start, start + base + (1 if ranks.rank < extra else 0))


def deepspeed_config(recipe: Recipe, zero_stage: int, rows_hint: int) -> dict[str, Any]:
    """The DeepSpeed config: ZeRO stage, clipping from the recipe, fp32 master weights; bf16/fp16 compute when
    the recipe's trainer dtype asks for it."""
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": max(1, rows_hint),
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": zero_stage},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
        "zero_allow_untested_optimizer": True,
    }
    if recipe.optimizer.max_grad_norm is not None:
        cfg["gradient_clipping"] = recipe.optimizer.max_grad_norm
    if recipe.precision.trainer_dtype == "bfloat16":
        cfg["bf16"] = {"enabled": True}
    elif recipe.precision.trainer_dtype == "float16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 12}
    return cfg


class DeepSpeedTrainer:
    """DeepSpeed backend with the ``Trainer`` interface (see module doc)."""

    def __init__(
        self,
        model: nn.Module,
        recipe: Recipe,
        *,
        device: torch.device,
        zero_stage: int = 0,
        micro_batch_size: int | None = None,
        version: int = 0,
        ranks: Ranks = Ranks(),
    ) -> None:
        import deepspeed

        if zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"ZeRO stage must be 0..3, got {zero_stage}")
        init_distributed(device, ranks)
        self.ranks = ranks
        self.recipe = recipe
        self.device = device
        self.zero_stage = zero_stage
        self.micro_batch_size = micro_batch_size
        self.version = version
        model = model.to(device)
        optimizer = build_optimizer(model.parameters(), recipe.optimizer)
        scheduler = build_scheduler(optimizer, recipe.schedule)
        config = deepspeed_config(recipe, zero_stage, micro_batch_size or 1)
        engine, opt, _, sched = deepspeed.initialize(
            model=model, optimizer=optimizer, lr_scheduler=scheduler, config=config
        )
        self.engine = engine
        self.optimizer = opt
        self.scheduler = sched
        self.model: nn.Module = engine.module

    def step(self, batch: TrainBatch) -> StepStats:
        """One optimiser step. With several ranks each takes its ``shard`` of the rows; DeepSpeed averages the
        ranks' gradients, so each rank's loss is scaled by the world size to keep the batch *sum* (token weights
        are batch-global), and the statistics are summed over ranks."""
        t0 = time.perf_counter()
        world = self.ranks.world_size
        acc = StepAccumulator(strict=world == 1)
        passes = self._passes(batch.rows)
        lr = float(self.engine.get_lr()[0])
        for i, (rows, weight) in enumerate(passes):
            self.engine.set_gradient_accumulation_boundary(i == len(passes) - 1)
            r = micro_batch_loss(self.engine, batch, rows, self.recipe, self.device)
            if weight:
                acc.add(r)
            self.engine.backward(r.loss * (world * weight))
        self.engine.step()
        if world > 1:
            acc.all_reduce(self.device)
        grad_norm = self.engine.get_global_grad_norm()
        norm = float(grad_norm) if grad_norm is not None else 0.0
        if not math.isfinite(norm):
            # DeepSpeed computes the norm inside step(); the weights are not published and the run stops here,
            # so the last checkpoint stays the valid state.
            raise NonFiniteError(f"non-finite gradient norm {norm}")
        if self.zero_stage < 3:
            check_finite_weights(self.model)
        self.version += 1
        return acc.stats(norm, time.perf_counter() - t0, lr)

    def weights(self) -> dict[str, Tensor]:
        """The full (gathered, under ZeRO-3) weights, detached on CPU."""
        if self.zero_stage == 3:
            import deepspeed

            params = list(self.model.parameters())
            with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
                return {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        return self.model.state_dict()

    def _passes(self, rows: int) -> list[tuple[slice, float]]:
        """This rank's forward/backward passes as (rows, loss weight). Every rank makes the same number of passes
        (ZeRO-3 gathers parameters collectively in each forward): a rank with fewer rows, or none, pads with
        zero-weighted passes over row 0, which join the collectives and add nothing to the gradient."""
        mine = shard(rows, self.ranks)
        size = mine.stop - mine.start
        passes = (
            [
                (slice(mine.start + m.start, mine.start + m.stop), 1.0)
                for m in micro_batches(size, self.micro_batch_size)
            ]
            if size
            else []
        )
        largest = -(-rows // self.ranks.world_size)
        per_pass = self.micro_batch_size or largest
        needed = max(1, -(-largest // per_pass))
        return passes + [(slice(0, 1), 0.0)] * (needed - len(passes))

    def weight_items(self) -> Iterator[tuple[str, Tensor]]:
        """State-dict entries for a weight sync. Under ZeRO-3 one parameter is gathered at a time (peak memory: the
        largest parameter, not the model), yielded while gathered: each tensor is valid only until the next item.
        Tied parameters are gathered once per state-dict name."""
        if self.zero_stage != 3:
            yield from self.model.state_dict().items()
            return
        import deepspeed

        params = dict(self.model.named_parameters(remove_duplicate=False))
        buffers = dict(self.model.named_buffers(remove_duplicate=False))
        for name in self.model.state_dict():
            param = params.get(name)
            if param is None:
                yield name, buffers[name]
                continue
            with deepspeed.zero.GatheredParameters([param], modifier_rank=None):
                yield name, param.data

    def close(self) -> None:
        """Nothing to release: the ranks' processes belong to ``TrainerGroup``."""

    def save(self, directory: str) -> None:
        self.engine.save_checkpoint(directory, tag="deepspeed", client_state={"version": self.version})

    def load(self, directory: str) -> None:
        _, client = self.engine.load_checkpoint(directory, tag="deepspeed")
        if client is None:
            raise FileNotFoundError(f"no DeepSpeed checkpoint in {directory}")
        self.version = int(client["version"])
