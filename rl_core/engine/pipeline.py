"""The engine: a generator process and the trainer (this process) running concurrently, PipelineRL-style.

Data flow::

    trainer process                                              generator process (spawned)
    ───────────────                                              ──────────────────────────
    sampler ─► AdmissionController ─► Order queue ─────────────► decode with KV cache; between decode steps
                                                                 poll SharedWeights (pipeline mode) and
    step ◄─ build_train_batch ◄─ recipe rewards/filters ◄─────── GenResult queue (scored groups, per-token
      │                                                          policy versions, busy time)
      └─► SharedWeights.publish(weights, version) ─────────────► picked up mid-sequence

The recipe's ``pipeline`` section picks the ``AdmissionPolicy`` (pipeline k / ppo_off_policy k / sync), i.e. how
far generation may run ahead and when the generator refreshes its weights: no code path differs otherwise. Where a
generator shares the trainer's GPU an overlapping schedule runs as ``sync``, said on stderr (``engine/schedule.py``).

Invariants:
- The trainer's ``version`` is the number of completed steps; it is what ``SharedWeights`` carries and what every
  generated token is tagged with; staleness = trainer version − token version, bounded by the policy.
- One metric point per step, written after the step (and the evaluation, when due); checkpoints are written
  after the point, so a resumed run restarts at the step after its checkpoint and rewrites nothing before it.
- Evaluation compute is accounted separately from training compute.
- A run whose prompts are all retired by No-Positive-Resampling ends as completed ("training data exhausted")
  once the batches already issued are used, with a checkpoint at its last step.
"""

from __future__ import annotations

import queue
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.multiprocessing as mp

from rl_core.algorithms.curriculum import NoPositiveResampling
from rl_core.algorithms.filters import DynamicSampler, is_zero_variance
from rl_core.contracts.points import MetricPoint
from rl_core.contracts.run_config import RunConfig
from rl_core.contracts.run_dir import RunDir, latest_checkpoint
from rl_core.engine.accounting import ComputeMeter, busy_clock
from rl_core.engine.admission import AdmissionController, AdmissionPolicy
from rl_core.engine.batch import Group, build_train_batch, group_rewards, rollout_stats
from rl_core.engine.checkpoint import load_engine_state, save_checkpoint
from rl_core.engine.collective import CollectiveWeights
from rl_core.engine.evaluation import Evaluator
from rl_core.engine.gen_worker import GeneratorSpec, generator_main
from rl_core.engine.length_buckets import OVERHEAD_TOKENS
from rl_core.engine.messages import GenResult, Order, Ready
from rl_core.engine.models import build_trainer_model, forward_flops_per_token, resolve_model_config
from rl_core.engine.sampler import PromptSampler, PromptsExhausted
from rl_core.engine.schedule import choose_schedule, torch_threads
from rl_core.engine.sinks import MetricSink, MultiSink
from rl_core.engine.trainer import TorchTrainer, Trainer
from rl_core.engine.weight_sync import make_channel
from rl_core.models import ModelConfig
from rl_core.tasks import build_task

Status = Literal["succeeded", "stopped", "failed"]


class DataExhausted(Exception):
    """Every issued batch was consumed and no prompt is left (No-Positive-Resampling retired them all): the run ends
    here as completed, not failed."""


class EngineError(RuntimeError):
    """A failure the engine reports as the run's final status (generator crash, timeout, exhausted data)."""


@dataclass(frozen=True)
class RunResult:
    status: Status
    reason: str
    step: int


def make_trainer(
    cfg: RunConfig, model_cfg: ModelConfig, model: torch.nn.Module, device: torch.device, version: int
) -> Trainer:
    """The configured backend around ``model`` (trainer backends are data in the config, not code paths)."""
    if cfg.trainer.ranks > 1:
        from rl_core.engine.trainer_group import TrainerGroup

        return TrainerGroup(cfg, model_cfg, model, version=version)
    if cfg.trainer.backend == "deepspeed":
        from rl_core.engine.trainer_deepspeed import DeepSpeedTrainer

        return DeepSpeedTrainer(
            model,
            cfg.recipe,
            device=device,
            zero_stage=cfg.trainer.zero_stage,
            micro_batch_size=cfg.trainer.micro_batch_size,
            version=version,
        )
    return TorchTrainer(
        model,
        cfg.recipe,
        device=device,
        micro_batch_size=cfg.trainer.micro_batch_size,
        version=version,
        bucket_overhead_tokens=OVERHEAD_TOKENS if cfg.trainer.length_buckets else None,
    )


class Engine:
    """One training run (see module doc). ``run()`` returns the final status; it never raises for run failures
    that the caller should report (those come back as ``failed`` with the reason)."""

    def __init__(self, cfg: RunConfig, out_dir: Path, sink: MetricSink, *, resume: bool = False) -> None:
        self.cfg = cfg
        self.out = out_dir
        self.sink = sink if isinstance(sink, MultiSink) else MultiSink([sink])
        self.resume = resume
        self.recipe = cfg.recipe
        self.schedule = choose_schedule(
            AdmissionPolicy.from_config(cfg.recipe.pipeline), cfg.device, cfg.generator_devices()
        )
        self.policy = self.schedule.used  # sync where a generator shares the trainer's GPU (engine/schedule.py)
        self.device = torch.device(cfg.device)
        self.step = 0
        self.elapsed = 0.0  # training wall time of previous sessions (resume)
        self.meter = ComputeMeter()
        self.samples_seen = 0
        self.tokens_seen = 0
        self._sampler_states: dict[int, dict[str, Any]] = {}
        self._procs: list[Any] = []
        self._orders: Any = None
        self._results: Any = None
        self._pending: dict[int, GenResult] = {}  # results that arrived before an earlier batch's
        self._expected = 0  # the batch index the trainer consumes next
        self._exhausted_at: int | None = None  # the first batch index that had no prompts left
        self._checkpointed = -1  # the step of the last checkpoint written by this session

    # ---- setup ---------------------------------------------------------------------------------------------

    def _setup(self) -> None:
        cfg = self.cfg
        if self.schedule.note is not None:
            print(self.schedule.note, file=sys.stderr, flush=True)
        self.threads = torch_threads(cfg.threads, self.policy.mode, len(cfg.generator_devices()))
        torch.set_num_threads(self.threads)
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.task = build_task(cfg.task)
        self.train_ids = [p.id for p in self.task.problems("train")]
        self.curriculum = NoPositiveResampling.from_config(self.recipe.curriculum)
        self.sampler = PromptSampler(self.train_ids, self.curriculum, seed=cfg.seed)
        self.model_cfg = resolve_model_config(cfg)
        model, self.tokenizer = build_trainer_model(cfg, self.model_cfg)
        ckpt = latest_checkpoint(RunDir(self.out).checkpoints) if self.resume else None
        if self.resume and ckpt is None:
            raise FileNotFoundError(f"--resume: no checkpoint under {self.out / 'checkpoints'}")
        self.trainer = make_trainer(cfg, self.model_cfg, model, self.device, version=0)
        retired = 0
        if ckpt is not None:
            self.trainer.load(str(ckpt))
            state = load_engine_state(ckpt)
            self.step = int(state["step"])
            retired = int(state["retired"])
            self.sampler.load_state_dict(state["sampler"])
            self.curriculum.load_state_dict(state["curriculum"])
            self.meter.load_state_dict(state["compute"])
            self.elapsed = float(state["elapsed"])
            self.samples_seen = int(state["samples_seen"])
            self.tokens_seen = int(state["tokens_seen"])
            self.sink.truncate_after(self.step)
        self._sampler_states[retired] = self.sampler.state_dict()
        self.admission = AdmissionController(self.policy, issued=retired, retired=retired)
        self._expected = retired
        self.channel = make_channel(cfg, self.trainer.weights(), version=self.trainer.version)
        self.flops_per_token = forward_flops_per_token(model)
        self.evaluator = Evaluator(cfg, self.model_cfg, self.task, self.tokenizer, self.device)
        self._start_generator()

    def _start_generator(self) -> None:
        """Spawn ``generator.processes`` generators (one order queue, one result queue) and wait until each is
        ready; a collective channel is connected and given the first weights in between."""
        ctx = mp.get_context("spawn")
        self._orders = ctx.Queue()
        self._results = ctx.Queue()
        for rank, device in enumerate(self.cfg.generator_devices(), start=1):
            spec = GeneratorSpec(
                model=self.model_cfg,
                task=self.cfg.task,
                recipe=self.recipe,
                device=device,
                threads=self.threads,
                seed=self.cfg.seed * 1_000_003 + self.step + (rank - 1) * 1_000_000_007,
                max_new_tokens=self.cfg.generator.max_new_tokens,
                backend=self.cfg.generator.backend,
                vllm=self.cfg.generator.vllm,
                decode=self.cfg.generator.decode,
                compile=self.cfg.generator.compile,
                rank=rank,
            )
            args = (spec, self.channel, self._orders, self._results)
            proc = ctx.Process(target=generator_main, args=args, daemon=True)
            proc.start()
            self._procs.append(proc)
        if isinstance(self.channel, CollectiveWeights):
            # Joins once every generator process connected (or raises after weight_sync.timeout_s).
            self.channel.connect_sender(self.device)
            self.channel.publish(self.trainer.weight_items(), self.trainer.version)
        for _ in self._procs:
            first = self._get(timeout=600.0)
            if not isinstance(first, Ready):
                raise EngineError(f"generator did not start: {getattr(first, 'error', first)}")

    def _stop_generator(self) -> None:
        if not self._procs:
            return
        try:
            for _ in self._procs:
                self._orders.put(None)
            for proc in self._procs:
                proc.join(timeout=10)
        finally:
            for proc in self._procs:
                if proc.is_alive():
                    proc.terminate()
                    proc.join(timeout=5)
            self._procs = []
            if isinstance(self.channel, CollectiveWeights):
                self.channel.close()

    # ---- generation ----------------------------------------------------------------------------------------

    def _issue(self) -> None:
        """Hand out every batch the admission policy allows right now."""
        while self._exhausted_at is None and (index := self.admission.try_admit()) is not None:
            try:
                ids = self.sampler.next_batch(self.recipe.batch.prompts)
            except PromptsExhausted:
                self._exhausted_at = index  # admitted, never issued: the run ends once the earlier ones are used
                return
            self._sampler_states[index + 1] = self.sampler.state_dict()
            refresh = self.policy.refresh == "batch_start" and index % self.policy.refresh_period == 0
            self._orders.put(
                Order(
                    batch_index=index,
                    problem_ids=tuple(ids),
                    n=self.recipe.batch.generations,
                    refresh=refresh,
                    inflight=self.policy.refresh == "inflight",
                )
            )

    def _get(self, timeout: float = 3600.0) -> GenResult | Ready:
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg: GenResult | Ready = self._results.get(timeout=1.0)
            except queue.Empty:
                dead = [p.exitcode for p in self._procs if not p.is_alive()]
                if dead:
                    raise EngineError(f"a generator process died (exit code {dead[0]})") from None
                if time.monotonic() > deadline:
                    raise EngineError(f"no rollouts from the generator for {timeout:.0f} s") from None
                continue
            if isinstance(msg, GenResult) and msg.error is not None:
                raise EngineError(f"generator failed: {msg.error}")
            return msg

    def _next_result(self) -> GenResult:
        """The next batch in issue order (several generators finish out of order: later ones wait here), so the
        consumed prompts, the sampler state at each checkpoint and resume follow the issue order."""
        self._issue()
        while self._expected not in self._pending:
            if self._exhausted_at is not None and self._expected >= self._exhausted_at:
                raise DataExhausted()
            got = self._get()
            if not isinstance(got, GenResult):
                raise EngineError(f"unexpected message from the generator: {got!r}")
            self._pending[got.batch_index] = got
        msg = self._pending.pop(self._expected)
        self._expected += 1
        self.meter.add(
            "generator",
            seconds=msg.busy_seconds,
            flops=(msg.sampled_tokens + msg.prompt_tokens) * self.flops_per_token,
            tokens=msg.sampled_tokens,
        )
        return msg

    def _collect(self) -> tuple[list[Group], int, dict[str, float]]:
        """The groups of the next step and how many batches they used (DAPO dynamic sampling may refill)."""
        results: list[GenResult] = []
        if self.recipe.filters.zero_variance == "dynamic_sampling":
            dyn: DynamicSampler[Group] = DynamicSampler(
                self.recipe.batch.prompts, self.recipe.filters.max_refill_rounds
            )
            while dyn.needs_more:
                if results:
                    self.admission.retire(1)  # absorbed: lets the refill batch in (same policy under sync)
                res = self._next_result()
                results.append(res)
                dyn.add(res.groups, group_rewards(res.groups, self.recipe))
            groups = dyn.take()
            if not groups:  # every round was zero-variance: train on the last one (no gradient, honest stats)
                groups = results[-1].groups
            final_retire = 1
        else:
            res = self._next_result()
            results.append(res)
            groups = res.groups
            final_retire = 1
        gen_stats = {
            "gen/batches": float(len(results)),
            "gen/weight_updates": float(sum(r.weight_updates for r in results)),
            "gen/busy_seconds": sum(r.busy_seconds for r in results),
            "gen/version_lag_at_start": float(self.trainer.version - min(r.version_start for r in results)),
            "gen/generator": float(results[-1].generator),
        }
        return groups, final_retire, gen_stats

    # ---- the loop ------------------------------------------------------------------------------------------

    def _engine_state(self) -> dict[str, Any]:
        retired = self.admission.retired
        return {
            "step": self.step,
            "retired": retired,
            "sampler": self._sampler_states[retired],
            "curriculum": self.curriculum.state_dict(),
            "compute": self.meter.state_dict(),
            "elapsed": self.elapsed + (time.monotonic() - self._t0),
            "samples_seen": self.samples_seen,
            "tokens_seen": self.tokens_seen,
            "config": self.cfg.to_dict(),
        }

    def _checkpoint(self) -> None:
        self._checkpointed = self.step
        save_checkpoint(
            RunDir(self.out).checkpoints,
            self.step,
            self._engine_state(),
            self.trainer.save,
            keep=self.cfg.checkpoint.keep,
        )
        for old in [k for k in self._sampler_states if k < self.admission.retired]:
            del self._sampler_states[old]

    def _evaluate(self, metrics: dict[str, float]) -> float:
        res = self.evaluator.evaluate(self.trainer.weights(), step=self.step)
        self.meter.add("eval", seconds=res.seconds, flops=res.tokens * self.flops_per_token, tokens=res.tokens)
        metrics.update(res.metrics())
        return res.pass_rate

    def _wall(self) -> float:
        return self.elapsed + (time.monotonic() - self._t0)

    def _point(self, metrics: dict[str, float], pass_rate: float | None) -> MetricPoint:
        metrics.update(self.meter.metrics())
        return MetricPoint(
            step=self.step,
            compute=self.meter.train_device_hours,
            pass_rate=pass_rate,
            metrics=metrics,
            wall_time=self._wall(),
        )

    def _train_step(self) -> dict[str, float]:
        groups, n_batches, metrics = self._collect()
        rewards = group_rewards(groups, self.recipe)
        metrics.update(rollout_stats(groups, rewards, self.trainer.version))
        for g in groups:
            passed = sum(1 for s in g.samples if s.correct and not s.truncated)
            self.curriculum.update(g.problem_id, passed, len(g.samples))
        metrics["curriculum/retired"] = float(len(self.curriculum.retired))
        metrics["train/dropped_groups"] = float(sum(is_zero_variance(r) for r in rewards))
        pad = self.tokenizer.pad_token_id
        batch = build_train_batch(groups, rewards, self.recipe, pad_id=int(pad if pad is not None else 0))
        clock = busy_clock(self.device.type)
        t0 = clock()
        if batch is None:
            # Nothing carries a gradient (every group zero-variance): the step is taken with no update.
            self.trainer.version += 1
            metrics["train/skipped"] = 1.0
            tokens = 0
        else:
            stats = self.trainer.step(batch)
            metrics.update(stats.metrics())
            metrics.update(batch.stats)
            metrics["train/skipped"] = 0.0
            tokens = int(batch.attention_mask.sum())
        seconds = clock() - t0
        self.meter.add("trainer", seconds=seconds, flops=3 * tokens * self.flops_per_token, tokens=tokens)
        self.channel.publish(self.trainer.weight_items(), self.trainer.version)
        self.admission.retire(n_batches)
        self.step += 1
        n_samples = sum(len(g.samples) for g in groups)
        self.samples_seen += n_samples
        self.tokens_seen += sum(len(s.response_ids) for g in groups for s in g.samples)
        wall = self._wall()
        metrics["throughput/samples_per_s"] = self.samples_seen / wall if wall > 0 else 0.0
        metrics["throughput/tokens_per_s"] = self.tokens_seen / wall if wall > 0 else 0.0
        metrics["train/version"] = float(self.trainer.version)
        return metrics

    def run(self) -> RunResult:
        cfg = self.cfg
        self._t0 = time.monotonic()
        try:
            self._setup()
            self._t0 = time.monotonic()
            if self.step == 0:
                metrics: dict[str, float] = {}
                self.sink.write(self._point(metrics, self._evaluate(metrics)))
            status: Status = "succeeded"
            reason = f"completed {cfg.budget.steps} steps"
            while self.step < cfg.budget.steps:
                try:
                    metrics = self._train_step()
                except DataExhausted:
                    reason = (
                        f"training data exhausted after step {self.step}: No-Positive-Resampling retired every "
                        "training prompt (each one's pass rate passed curriculum.pass_rate_threshold)"
                    )
                    if self._checkpointed != self.step:
                        self._checkpoint()
                    break
                last = self.step >= cfg.budget.steps
                over = self._over_budget()
                due = self.step % cfg.eval.every == 0 or last or over is not None
                action = self.sink.write(self._point(metrics, self._evaluate(metrics) if due else None))
                if action == "stop":
                    status, reason = "stopped", f"stop requested by a metrics sink at step {self.step}"
                elif over:
                    reason = over
                if self.step % cfg.checkpoint.every == 0 or last or action == "stop" or over:
                    self._checkpoint()
                if action == "stop" or over:
                    break
            return RunResult(status, reason, self.step)
        finally:
            self.admission_close()
            self._stop_generator()
            if hasattr(self, "trainer"):  # set up before any failure that can follow
                self.trainer.close()

    def admission_close(self) -> None:
        adm = getattr(self, "admission", None)
        if adm is not None:
            adm.close()

    def _over_budget(self) -> str | None:
        b = self.cfg.budget
        if b.max_device_hours is not None and self.meter.train_device_hours >= b.max_device_hours:
            return f"compute budget of {b.max_device_hours} device-hours reached at step {self.step}"
        if b.max_minutes is not None and self._wall() >= 60 * b.max_minutes:
            return f"wall-clock budget of {b.max_minutes} minutes reached at step {self.step}"
        return None
