"""The generator process: builds its own model, takes ``Order``s, streams scored ``GenResult``s back.

Runs under ``torch.multiprocessing`` (spawn), on ``spec.device`` (the layout's generator device). Weights never
travel through the queues: the process connects to the trainer's weight channel (``rl_core.engine.weight_sync``:
shared memory, CUDA IPC or a bucketed collective), starts from the first published weights and, per order,

- ``inflight`` (pipeline): passes ``Generator.generate`` a weight source that is polled between decode steps; when
  the published version moved it copies the channel's tensors (under the channel's lock) into a staging buffer
  on its device, allocated once, and hands them to the generator, which loads them in place and keeps its KV
  cache;
- ``refresh`` (sync / PPO-off-policy group start): loads the latest weights before the batch, none during it.

Every completion is scored here by the task's verifier, so rewards are computed in parallel with training.
Invariants: each token's version is the version of the weights that produced its logits; any exception is
reported as ``GenResult(error=...)`` before the process exits, so the trainer never waits on a dead generator.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rl_core.contracts.vllm_options import VLLMOptions
from rl_core.engine.accounting import busy_clock
from rl_core.engine.batch import Group, Sample
from rl_core.engine.collective import CollectiveWeights
from rl_core.engine.messages import GenResult, Order, Ready
from rl_core.engine.weight_sync import WeightChannel, staging_for
from rl_core.generation import Generator, Rollout, decoder_flops_per_token
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe.model import Recipe
from rl_core.tasks import TaskConfig, build_task


@dataclass(frozen=True)
class GeneratorSpec:
    """Everything the generator process needs to build itself (picklable data only)."""

    model: ModelConfig
    task: TaskConfig
    recipe: Recipe
    device: str
    threads: int
    seed: int
    max_new_tokens: int
    backend: str = "torch"
    vllm: VLLMOptions | None = None
    decode: str = "auto"
    compile: str = "auto"
    rank: int = 1  # this generator's rank in a collective weight channel (1..generator.processes)


class ChannelWeightSource:
    """A ``WeightSource`` over a weight channel: None while the version is unchanged, else a consistent copy in
    staging buffers on the generator's device."""

    def __init__(self, channel: WeightChannel, current: int, device: torch.device | str) -> None:
        self.channel = channel
        self.current = current
        self.staging: dict[str, Tensor] = staging_for(channel, device)

    def __call__(self) -> tuple[int, Mapping[str, Tensor]] | None:
        if self.channel.version == self.current:
            return None
        self.current = self.channel.read_into(self.staging)
        return self.current, self.staging


def to_groups(rollouts: list[Rollout], problems: dict[str, Any], task: Any, batch_index: int) -> list[Group]:
    """Score rollouts with the task's reward and group them by prompt (order preserved)."""
    by_prompt: dict[int, list[Sample]] = {}
    ids: dict[int, str] = {}
    for r in rollouts:
        correct = task.reward(problems[r.problem_id], r.text) > 0.5
        sample = Sample(
            problem_id=r.problem_id,
            prompt_ids=list(r.prompt_ids),
            response_ids=list(r.response_ids),
            logprobs=[float(x) for x in r.logprobs],
            versions=[int(v) for v in r.versions],
            loss_mask=[int(bool(m)) for m in r.loss_mask],
            correct=bool(correct),
            truncated=bool(r.truncated),
            interrupted=bool(r.interrupted),
        )
        by_prompt.setdefault(r.prompt_index, []).append(sample)
        ids[r.prompt_index] = r.problem_id
    return [Group(ids[i], tuple(by_prompt[i]), batch_index) for i in sorted(by_prompt)]


def _build_generator(spec: GeneratorSpec, model: Any, tokenizer: Any, device: torch.device) -> Any:
    """The configured backend: the torch sampling loop, or vLLM (same interface; ``generator.backend``), built from
    the same model, tokenizer, recipe, device, token cap and seed."""
    args = (model, tokenizer, spec.recipe)
    common: dict[str, Any] = {"device": device, "max_new_tokens": spec.max_new_tokens, "seed": spec.seed}
    if spec.backend == "vllm":
        from rl_core.generation.vllm_backend import build_vllm_generator

        return build_vllm_generator(*args, **common, options=spec.vllm or VLLMOptions())
    return Generator(*args, **common, decode=spec.decode, compile=spec.compile)  # type: ignore[arg-type]


def generator_main(spec: GeneratorSpec, channel: WeightChannel, orders: Any, results: Any) -> None:
    """Process entry point (see module doc)."""
    try:
        if isinstance(channel, CollectiveWeights):
            channel.connect_receiver(spec.device, spec.rank)
            channel.wait_for_version(channel.initial_version)
        torch.set_num_threads(spec.threads)
        torch.manual_seed(spec.seed)
        device = torch.device(spec.device)
        tokenizer = build_tokenizer(spec.model)
        model = build_model(
            spec.model,
            tokenizer,
            device,
            dtype=spec.recipe.precision.generator_dtype,
            fp32_lm_head=spec.recipe.precision.fp32_lm_head,
            lm_head_operands=spec.recipe.precision.lm_head_operands,
        )
        task = build_task(spec.task)
        problems = {p.id: p for p in task.problems("train")}
        gen = _build_generator(spec, model, tokenizer, device)
        source = ChannelWeightSource(channel, current=-1, device=device)
        first = source()
        assert first is not None
        gen.load_weights(*first)
        clock = busy_clock(device.type)
        results.put(Ready(forward_flops_per_token=decoder_flops_per_token(model.config)))
        while True:
            order: Order | None = orders.get()
            if order is None:
                gen.close()
                if isinstance(channel, CollectiveWeights):
                    channel.close()
                return
            t0 = clock()
            updates_before = gen.stats.weight_updates
            if order.refresh:
                update = source()
                if update is not None:
                    gen.load_weights(*update)
            version_start = gen.version
            batch = [problems[pid] for pid in order.problem_ids]
            rollouts = gen.generate(batch, order.n, weights=source if order.inflight else None)
            groups = to_groups(rollouts, problems, task, order.batch_index)
            results.put(
                GenResult(
                    batch_index=order.batch_index,
                    groups=groups,
                    busy_seconds=clock() - t0,
                    sampled_tokens=sum(len(r.response_ids) for r in rollouts),
                    prompt_tokens=sum(len(r.prompt_ids) for r in rollouts),
                    weight_updates=gen.stats.weight_updates - updates_before,
                    version_start=version_start,
                    version_end=gen.version,
                    generator=spec.rank,
                )
            )
    except BaseException as exc:  # report, then exit: the trainer turns this into the run's failure
        results.put(GenResult(batch_index=-1, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))
        raise
