"""Optuna's pruners as replay policies, driven through Optuna's own API (``pip install scalerl[replay]``).

Each run of the grid is one trial of a maximising study; its evaluations are reported with ``trial.report(value,
step)`` and the run is stopped when ``trial.should_prune()`` says so. Optuna's ``step`` is an integer: the rank of
the evaluation's x among every evaluation time of the grid (1, 2, ...), so "resource" means the same on every run.

Configurations (documented in docs/decisions.md; ``n`` = number of evaluation times up to the budget):
- ``median``: ``MedianPruner(n_startup_trials=2, n_warmup_steps=<rank at 10% of the budget>)``: the default
  pruner, with fewer startup trials (grids are small) and no decisions in the first tenth of the budget.
- ``asha``: ``SuccessiveHalvingPruner(min_resource=max(1, n // 9), reduction_factor=3, min_early_stopping_rate=0)``:
  rungs at n/9, n/3 and n, keeping the top third at each.
- ``hyperband``: ``HyperbandPruner(min_resource=max(1, n // 9), max_resource=n, reduction_factor=3)``.

Two ways to run them: ``side by side`` (every trial live at once, as scalerl runs a grid; reports in a random order
at each evaluation time) and ``sequential`` (trials one after another, as most Optuna users run them, so the median
pruner can compare with completed trials). Both are averaged over random orders by the caller.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_core.scaling.measure.replay import (
    GridView,
    PolicyFactory,
    ReplayResult,
    RunCurve,
    SequentialFactory,
    aggregate,
    default_budget,
    evaluation_times,
    replay,
    replay_sequential,
)

PRUNERS = ("median", "asha", "hyperband")


@dataclass(frozen=True)
class PrunerSettings:
    """One configuration of a pruner (the defaults are the module docstring's): ``reduction_factor`` (ASHA,
    Hyperband), ``min_resource`` as a fraction of the grid's evaluation times (ASHA, Hyperband: at least 1 step) and
    ``warmup`` as a fraction of the budget (median rule). A pruner's frontier replays several of them."""

    reduction_factor: int = 3
    min_resource: float = 1.0 / 9.0
    warmup: float = 0.1

    def label(self, kind: str) -> str:
        if kind == "median":
            return f"warmup {self.warmup:g}"
        return f"rf {self.reduction_factor}, min {self.min_resource:.3g}"


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:  # an optional extra
        raise ImportError(
            "Optuna's pruners need optuna: pip install 'scalerl[replay]' (or pip install optuna)"
        ) from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def make_pruner(kind: str, n_steps: int, warmup_steps: int, settings: PrunerSettings | None = None) -> Any:
    """The configured pruner (see module docstring; ``settings`` other than the defaults for a frontier)."""
    optuna = _optuna()
    cfg = settings or PrunerSettings()
    rung = max(1, n_steps // 9) if settings is None else max(1, int(n_steps * cfg.min_resource))
    rf = cfg.reduction_factor
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=warmup_steps, interval_steps=1)
    if kind == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=rung, reduction_factor=rf, min_early_stopping_rate=0)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=rung, max_resource=n_steps, reduction_factor=rf)
    raise ValueError(f"unknown pruner {kind!r}; choose from {PRUNERS}")


class _Steps:
    """x -> Optuna step (1-based rank among the grid's evaluation times)."""

    def __init__(self, runs: Sequence[RunCurve], budget: float, warmup: float = 0.1) -> None:
        self.times = evaluation_times(runs, budget)
        self.n = int(self.times.size)
        self.warmup = int(np.searchsorted(self.times, warmup * budget, side="right"))

    def of(self, x: float) -> int:
        return int(np.searchsorted(self.times, x, side="left")) + 1


def _study(kind: str, steps: _Steps, seed: int, replica: int = 0, settings: PrunerSettings | None = None) -> Any:
    """A maximising study named after ``kind``, ``seed`` and ``replica`` (one name per replayed order): Hyperband
    assigns a trial to a bracket by a hash of the study name and the trial number, and an unnamed study gets a
    random name, so without one a replay (and the benchmark's Hyperband figures) would change from run to run."""
    optuna = _optuna()
    sampler = optuna.samplers.RandomSampler(seed=seed)
    return optuna.create_study(
        study_name=f"scalerl-replay-{kind}-{seed}-{replica}",
        direction="maximize",
        pruner=make_pruner(kind, steps.n, steps.warmup, settings),
        sampler=sampler,
    )


def side_by_side(kind: str, seed: int, settings: PrunerSettings | None = None) -> PolicyFactory:
    """Every run is a live trial from the start; new evaluations are reported in a random order."""

    def factory(runs: Sequence[RunCurve], budget: float) -> Callable[[GridView], Mapping[str, str]]:
        steps = _Steps(runs, budget, (settings or PrunerSettings()).warmup)
        study = _study(kind, steps, seed, 0, settings)
        trials = {r.name: study.ask() for r in runs}
        rng = np.random.default_rng(seed)

        def policy(view: GridView) -> Mapping[str, str]:
            out: dict[str, str] = {}
            names = sorted(view.live)
            for i in rng.permutation(len(names)):
                run = view.runs[names[int(i)]]
                if run.x.size == 0 or run.x[-1] != view.x_now:
                    continue
                trial, step = trials[run.name], steps.of(view.x_now)
                trial.report(float(run.y[-1]), step)
                if trial.should_prune():
                    study.tell(trial, state=_optuna().trial.TrialState.PRUNED)
                    out[run.name] = f"optuna {kind}: pruned at step {step} (value {run.y[-1]:.3f})"
            return out

        return policy

    return factory


def sequential(kind: str, seed: int, settings: PrunerSettings | None = None) -> SequentialFactory:
    """Trials one after another; each completed trial tells Optuna its last value."""

    replicas = itertools.count()  # the caller builds one policy per order: each gets its own study name

    def factory(runs: Sequence[RunCurve], budget: float) -> Callable[[RunCurve], tuple[float | None, str | None]]:
        steps = _Steps(runs, budget, (settings or PrunerSettings()).warmup)
        study = _study(kind, steps, seed, next(replicas), settings)

        def trial_of(run: RunCurve) -> tuple[float | None, str | None]:
            trial = study.ask()
            for x, y in zip(run.x, run.y, strict=True):
                step = steps.of(float(x))
                trial.report(float(y), step)
                if trial.should_prune():
                    study.tell(trial, state=_optuna().trial.TrialState.PRUNED)
                    return float(x), f"optuna {kind}: pruned at step {step} (value {y:.3f})"
            study.tell(trial, float(run.y[-1]))
            return None, None

        return trial_of

    return factory


def replay_pruner(
    kind: str,
    runs: Sequence[RunCurve],
    budget: float | None,
    *,
    mode: str,
    orders: int = 20,
    seed: int = 0,
    settings: PrunerSettings | None = None,
) -> ReplayResult:
    """One pruner, side by side (``mode="parallel"``) or one trial after another (``"sequential"``), averaged
    over ``orders`` random orders; ``settings``: a configuration other than the default (for a frontier)."""
    until = default_budget(runs) if budget is None else budget
    name = f"optuna-{kind}-{mode}"
    if mode == "sequential":
        return replay_sequential(name, runs, sequential(kind, seed, settings), until, orders=orders, seed=seed)
    if mode != "parallel":
        raise ValueError(f"mode must be 'parallel' or 'sequential', got {mode!r}")
    return aggregate(
        name, [replay(name, runs, side_by_side(kind, seed + k, settings), until) for k in range(max(1, orders))]
    )
