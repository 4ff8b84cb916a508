"""``ScalerlCallback``: report a Hugging Face / TRL trainer's run to scalerl and stop it when the service says so.

    from scalerl.integrations.trl import ScalerlCallback
    trainer = GRPOTrainer(..., callbacks=[ScalerlCallback("grpo-lr1e-6", pass_rate="eval_reward", budget=500)])

What it reports, one point per optimizer step that logged something (``state.global_step``):
- ``pass_rate``: the first of the ``pass_rate`` keys found in an evaluation's metrics (e.g. ``eval_reward`` of
  TRL's GRPOTrainer with a 0/1 reward, ``eval_accuracy``); a value outside [0, 1] is kept as a metric, not
  fitted (the service fits pass rates), and a warning says so once.
- ``compute``: ``"gpu_hours"`` (default) = training wall time since ``on_train_begin`` × ``devices`` (default:
  ``args.world_size``, one device per process) / 3600, *without evaluations*: the clock counts up to each step's
  end, and the time from a step's end to ``on_evaluate`` (the logging and the evaluation) is left out;
  ``"tokens"`` = TRL's cumulative ``num_tokens`` (or ``state.num_input_tokens_seen``); ``"flops"`` =
  ``state.total_flos``; or a callable ``(args, state) -> float``.
  A trainer resumed from a checkpoint gets tokens and FLOPs back with its state; its GPU-hours continue from the
  compute the service stored at the checkpoint's step (looked up once, at the start of training).
- ``metrics``: every finite number the trainer logs (loss, reward, kl, entropy, completion lengths, ...) except
  timings, or only the names given in ``metrics``; at most 64 (the service's limit).

The training metrics and the evaluation of one step are merged into one point (the step's point is sent when the
next step ends, or at the end), since the service never overwrites a stored step.

Run identity (as W&B's ``resume``): a fresh training under the name of a run that has ended starts a new run
``<name>-2`` (``resume="auto"``); a trainer resumed from a checkpoint (``state.global_step > 0`` at the start)
continues its run, reopening it if it had ended (``resume="allow"``). Pass ``resume=`` to choose yourself.
``config`` (default: the TrainingArguments' scalar settings that usually differ between runs: learning rate,
batch size, ...), ``tags`` and ``notes`` describe the run on the service.

A run with no evaluation can never be forecast: when training logged ``warn_after_steps`` steps without a pass rate
among them, a warning names the keys looked for (set ``eval_strategy`` and ``pass_rate=``). A trainer resumed from a
checkpoint, whose step count continues from there, counts the evaluations in its restored ``state.log_history``.

Stopping: when the service's answer (or a poll of the run) says ``stop``, the next ``on_step_end`` sets
``control.should_save`` (the Trainer writes ``checkpoint-<step>`` right away) and
``control.should_training_stop``; the run is then reported ``stopped``, otherwise ``succeeded``. Preemption: when
SIGTERM/SIGHUP reached the process (your own handler or callback saved a checkpoint and stopped training; see
:mod:`scalerl.client.exits`), the run ends ``stopped`` ("the trainer ended after SIGTERM at step N"), and the
trainer resumed from that checkpoint continues it. With several
processes, only process zero talks to the service and the decision is broadcast to the others with
``torch.distributed`` so every rank stops at the same step.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from scalerl.client import Reporter, exits
from scalerl.client.api import FinalStatus, Point, ResumePolicy, ScalerlError

log = logging.getLogger("scalerl.integrations.trl")

ComputeFn = Callable[[TrainingArguments, TrainerState], float]
_SKIP_SUFFIXES = ("_runtime", "_per_second", "epoch", "total_flos", "step_time")
#: How long a resumed trainer waits for its run to be found before its GPU-hours restart at 0 (with a warning).
RESUME_LOOKUP_SECONDS = 30.0


class ScalerlCallback(TrainerCallback):
    """See the module docstring. ``experiment`` names the experiment the run joins (created if missing, like W&B's
    ``project``; its unit: ``compute_unit``, default the ``compute`` name), or ``experiment_id`` gives one.
    ``reporter`` (a ready :class:`~scalerl.client.Reporter`) replaces the connection arguments;
    ``reporter_options`` tune the one it starts (``flush_interval``, ``poll_interval``...)."""

    def __init__(
        self,
        run_name: str | None = None,
        *,
        pass_rate: str | Sequence[str] = ("eval_reward", "eval_accuracy", "eval_pass_rate"),
        compute: str | ComputeFn = "gpu_hours",
        devices: int | None = None,
        metrics: Sequence[str] | None = None,
        budget: float | None = None,
        experiment_id: int | None = None,
        experiment: str | None = None,
        compute_unit: str | None = None,
        task: str | None = None,
        model: str | None = None,
        url: str | None = None,
        token: str | None = None,
        reporter: Reporter | None = None,
        stop_on_action: bool = True,
        reporter_options: Mapping[str, Any] | None = None,
        resume: ResumePolicy | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        notes: str | None = None,
        warn_after_steps: int = 50,
    ) -> None:
        if isinstance(compute, str) and compute not in ("gpu_hours", "tokens", "flops"):
            raise ValueError(f"compute: {compute!r} is not one of gpu_hours, tokens, flops (or pass a callable)")
        self.run_name = run_name
        self.pass_rate_keys = (pass_rate,) if isinstance(pass_rate, str) else tuple(pass_rate)
        self.compute = compute
        self.devices = devices
        self.metric_names = None if metrics is None else set(metrics)
        if experiment is not None and experiment_id is not None:
            raise ValueError("give experiment= (a name) or experiment_id=, not both")
        self.registration: dict[str, Any] = {
            "budget": budget,
            "experiment_id": experiment_id,
            "task": task,
            "model": model,
        }
        if experiment is not None:  # joined by name, created if missing, in the unit this callback reports
            unit = compute_unit or (compute if isinstance(compute, str) else "compute")
            self.registration.update(experiment=experiment, compute_unit=unit)
        self.url = url
        self.token = token
        self.reporter = reporter
        self.stop_on_action = stop_on_action
        self.reporter_options = dict(reporter_options or {})
        self.resume = resume
        self.config = None if config is None else dict(config)
        self.tags = None if tags is None else list(tags)
        self.notes = notes
        self.warn_after_steps = warn_after_steps
        self._evaluated = False
        self._warned_no_eval = False
        self.stopped_by_service = False
        self._pending: Point | None = None
        self._clock = 0.0  # the moment up to which training time is counted
        self._train_seconds = 0.0  # wall time of training so far, evaluations excluded
        self._resumed_compute = 0.0
        self._tokens = 0.0
        self._warned_range = False
        self._owns_reporter = reporter is None

    # ---- helpers ----------------------------------------------------------------------------------------------

    def _compute(self, args: TrainingArguments, state: TrainerState) -> float:
        if callable(self.compute):
            return float(self.compute(args, state))
        if self.compute == "tokens":
            return max(self._tokens, float(getattr(state, "num_input_tokens_seen", 0) or 0))
        if self.compute == "flops":
            return float(state.total_flos or 0.0)
        devices = self.devices if self.devices is not None else max(1, int(args.world_size))
        return self._resumed_compute + self._train_seconds * devices / 3600.0

    def _stored_compute_at(self, step: int) -> float:
        """The compute the service stored for this run at its last step <= ``step`` (the checkpoint a resumed
        trainer starts from), so that wall-clock GPU-hours, which restart at zero in a new process, continue from
        there. 0 with a warning when the service cannot say (the resumed part of the curve is then misplaced)."""
        rep = self.reporter
        run_id = None if rep is None else rep.wait_for_run(timeout=RESUME_LOOKUP_SECONDS)
        if rep is None or run_id is None:
            log.warning("scalerl: could not find the run to resume; GPU-hours restart at 0 from step %d", step)
            return 0.0
        found: float | None = None
        after: int | None = None
        try:
            while True:
                page = rep.client.get_points(run_id, after_step=after)
                found = next((float(p["compute"]) for p in reversed(page) if int(p["step"]) <= step), found)
                if not page or int(page[-1]["step"]) >= step:
                    break
                after = int(page[-1]["step"])
        except ScalerlError as exc:
            log.warning(
                "scalerl: could not read run %d's compute (%s); GPU-hours restart at 0 from step %d", run_id, exc, step
            )
            return 0.0
        return found or 0.0

    def _pass_rate_of(self, logs: Mapping[str, Any]) -> float | None:
        """The first pass-rate key's value in ``logs`` if it is a pass rate (a finite number in [0, 1])."""
        for key in self.pass_rate_keys:
            value = logs.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                return float(value) if 0.0 <= value <= 1.0 else None
        return None

    def _keep(self, name: str) -> bool:
        if self.metric_names is not None:
            return name in self.metric_names
        return not name.endswith(_SKIP_SUFFIXES)

    def _send_pending(self, before_step: int | None = None) -> None:
        p = self._pending
        if p is None or self.reporter is None or (before_step is not None and p.step >= before_step):
            return
        self.reporter.log(p.step, p.compute, p.pass_rate, p.metrics)
        self._pending = None

    def _service_says_stop(self, state: TrainerState) -> bool:
        says = self.reporter is not None and self.reporter.should_stop
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                import torch

                flag = torch.tensor([1.0 if says else 0.0])
                if dist.get_backend() == "nccl":
                    flag = flag.cuda()
                dist.broadcast(flag, src=0)
                says = bool(flag.item() > 0)
        except ImportError:
            pass
        return says

    # ---- TrainerCallback --------------------------------------------------------------------------------------

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._clock = time.monotonic()
        self._train_seconds = 0.0
        if self.reporter is None and state.is_world_process_zero:
            name = self.run_name or args.run_name or Path(str(args.output_dir or "trl-run")).name
            resume: ResumePolicy = self.resume or ("allow" if state.global_step > 0 else "auto")
            self.reporter = Reporter.start(
                name,
                url=self.url,
                token=self.token,
                config=self.config if self.config is not None else args_config(args),
                tags=self.tags,
                notes=self.notes,
                **self.registration,
                **{"resume": resume, **self.reporter_options},
            )
        # A resumed trainer's step count continues from the checkpoint and its evaluations before it are only in the
        # restored log history: without them the first log after a resume past warn_after_steps warned that no
        # evaluation was ever seen.
        self._evaluated = self._evaluated or any(self._pass_rate_of(entry) is not None for entry in state.log_history)
        if state.global_step > 0 and self.compute == "gpu_hours" and state.is_world_process_zero:
            # Resumed from a checkpoint: tokens and FLOPs come back with the trainer's state, wall time does not.
            self._resumed_compute = self._stored_compute_at(int(state.global_step))

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.reporter is None or not logs:
            return
        if isinstance(logs.get("num_tokens"), int | float):
            self._tokens = max(self._tokens, float(logs["num_tokens"]))
        pass_rate = None
        for key in self.pass_rate_keys:
            value = logs.get(key)
            if isinstance(value, int | float) and math.isfinite(value):
                if 0.0 <= value <= 1.0:
                    pass_rate = float(value)
                elif not self._warned_range:
                    self._warned_range = True
                    log.warning("scalerl: %s=%r is not a pass rate in [0, 1]; reported as a metric only", key, value)
                break
        numbers = {
            k: float(v)
            for k, v in logs.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and self._keep(k)
        }
        if pass_rate is not None:
            self._evaluated = True
        elif not self._evaluated and not self._warned_no_eval and state.global_step >= self.warn_after_steps:
            self._warned_no_eval = True
            log.warning(
                "scalerl: %d steps and no evaluation with a pass rate (looked for %s): nothing can be forecast; "
                "set TrainingArguments(eval_strategy='steps', eval_steps=...) and pass_rate='<your eval key>'",
                state.global_step,
                ", ".join(self.pass_rate_keys),
            )
        point = Point.make(state.global_step, self._compute(args, state), pass_rate, numbers)
        if self._pending is not None and self._pending.step != point.step:
            self._send_pending()
        self._pending = point if self._pending is None else self._pending.merged(point)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        now = time.monotonic()
        self._train_seconds += now - self._clock
        self._clock = now
        self._send_pending(before_step=state.global_step)
        if self.stop_on_action and not self.stopped_by_service and self._service_says_stop(state):
            self.stopped_by_service = True
            log.warning(
                "scalerl: the service asked run %s to stop at step %d; saving a checkpoint and stopping",
                self.reporter.run_id if self.reporter else "?",
                state.global_step,
            )
            control.should_save = True
            control.should_training_stop = True

    def on_evaluate(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        # The time since the step's end was the logging and this evaluation: not training compute.
        self._clock = time.monotonic()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._send_pending()
        if self.reporter is not None and self._owns_reporter:
            signalled = exits.received()
            status: FinalStatus = "stopped" if self.stopped_by_service or signalled else "succeeded"
            if self.stopped_by_service:
                reason = f"stopped by the service at step {state.global_step} (checkpoint saved)"
            elif signalled is not None:  # a preemption: the trainer's own handler stopped training
                saved = (Path(str(args.output_dir)) / f"checkpoint-{state.global_step}").is_dir()
                reason = f"the trainer ended after {signalled.name} at step {state.global_step}" + (
                    " (checkpoint saved)" if saved else " (no checkpoint at that step)"
                )
            else:
                reason = f"training finished at step {state.global_step}"
            self.reporter.finish(status, reason)


#: The TrainingArguments that usually tell runs of one sweep apart (reported as the run's config).
CONFIG_ARGS = (
    "learning_rate",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_train_epochs",
    "max_steps",
    "warmup_ratio",
    "weight_decay",
    "lr_scheduler_type",
    "seed",
    "beta",
    "num_generations",
    "temperature",
    "max_completion_length",
    "loss_type",
    "epsilon",
    "epsilon_high",
    "scale_rewards",
)


def args_config(args: TrainingArguments) -> dict[str, Any]:
    """The scalar settings of ``args`` named in :data:`CONFIG_ARGS` that it has (GRPOConfig adds TRL's)."""
    out: dict[str, Any] = {}
    for name in CONFIG_ARGS:
        value: Any = getattr(args, name, None)
        if isinstance(value, Enum):  # lr_scheduler_type
            value = value.value
        if isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value)):
            out[name] = value
    return out
