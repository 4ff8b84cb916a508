"""Replay :class:`~scalerl.integrations.optuna_pruner.ScalerlPruner` through Optuna itself on a recorded grid, with
the measures of ``scalerl replay`` (:mod:`rl_core.scaling.measure.replay`: compute, pick, regret).

Each run is a trial of a maximising study; ``trial.report(pass_rate, step)`` with ``step`` the rank of the x among
the grid's evaluation times, mapped back to the x by the pruner's ``compute=`` (so it fits the same curves as
``scalerl replay``). A trial's final report up to the budget ends it (``study.tell`` with its value, not asked
whether to prune: the replay counts a run with all its evaluations as finished).

- ``side_by_side``: every trial live at once. At each evaluation time every trial with a new point reports it, then
  each asks ``should_prune()`` (workers that report together), and the pruned ones are told ``PRUNED``.
- ``one_by_one``: trials one after another, each seeing the finished ones (as most Optuna users run a study).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import optuna

from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.measure.replay import (
    GridView,
    ReplayResult,
    RunCurve,
    default_budget,
    evaluation_times,
    replay,
    replay_sequential,
)
from scalerl.integrations.optuna_pruner import ScalerlPruner

NAME = "scalerl-optuna-pruner"


class _Steps:
    """x <-> Optuna step (1-based rank among the grid's evaluation times up to the budget)."""

    def __init__(self, runs: Sequence[RunCurve], budget: float) -> None:
        self.times = evaluation_times(runs, budget)

    def of(self, x: float) -> int:
        return int(np.searchsorted(self.times, x, side="left")) + 1

    def compute(self, step: int) -> float:
        return float(self.times[step - 1])


def _study(runs: Sequence[RunCurve], budget: float, policy: Policy | None, name: str) -> tuple[optuna.Study, _Steps]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    steps = _Steps(runs, budget)
    pruner = ScalerlPruner(budget, compute=steps.compute, policy=policy)
    return optuna.create_study(study_name=name, direction="maximize", pruner=pruner), steps


def _recipe_attr(trial: optuna.Trial, name: str) -> None:
    """Seeds of one recipe, as ``scalerl replay`` reads them from the file names."""
    from rl_core.scaling.measure.replay import replicate_key

    key = replicate_key(name)
    if key is not None:
        trial.set_user_attr("scalerl_recipe", key)


def side_by_side(
    policy: Policy | None = None,
) -> Callable[[Sequence[RunCurve], float], Callable[[GridView], Mapping[str, str]]]:
    """A replay policy (:func:`rl_core.scaling.measure.replay.replay`) that asks the pruner through Optuna; its
    ``policy`` defaults to the service's (``min_live=1``), as ``scalerl replay``'s scalerl row."""

    def factory(runs: Sequence[RunCurve], budget: float) -> Callable[[GridView], Mapping[str, str]]:
        study, steps = _study(runs, budget, policy or Policy(), f"{NAME}-side-by-side")
        trials = {r.name: study.ask() for r in runs}
        for r in runs:
            _recipe_attr(trials[r.name], r.name)
        ends = {r.name: r.upto(budget).x.size for r in runs}
        done: set[str] = set()

        def policy_fn(view: GridView) -> Mapping[str, str]:
            asking = []
            for name in sorted(view.live - done):
                run = view.runs[name]
                if run.x.size == 0 or run.x[-1] != view.x_now:
                    continue
                trials[name].report(float(run.y[-1]), steps.of(view.x_now))
                if run.x.size >= ends[name]:
                    study.tell(trials[name], float(run.y[-1]))
                    done.add(name)
                else:
                    asking.append(name)
            pruned = [n for n in asking if trials[n].should_prune()]
            out = {}
            for n in pruned:
                study.tell(trials[n], state=optuna.trial.TrialState.PRUNED)
                done.add(n)
                out[n] = _reason(study, trials[n].number, view.x_now)
            return out

        return policy_fn

    return factory


def one_by_one(
    policy: Policy | None = None,
) -> Callable[[Sequence[RunCurve], float], Callable[[RunCurve], tuple[float | None, str | None]]]:
    """A sequential replay policy (:func:`rl_core.scaling.measure.replay.replay_sequential`): one study per order."""
    orders = itertools.count()

    def factory(runs: Sequence[RunCurve], budget: float) -> Callable[[RunCurve], tuple[float | None, str | None]]:
        study, steps = _study(runs, budget, policy, f"{NAME}-one-by-one-{next(orders)}")

        def trial_of(run: RunCurve) -> tuple[float | None, str | None]:
            trial = study.ask()
            _recipe_attr(trial, run.name)
            for i, (x, y) in enumerate(zip(run.x, run.y, strict=True)):
                trial.report(float(y), steps.of(float(x)))
                if i + 1 < run.x.size and trial.should_prune():
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    return float(x), _reason(study, trial.number, float(x))
            study.tell(trial, float(run.y[-1]))
            return None, None

        return trial_of

    return factory


def _reason(study: optuna.Study, number: int, x: float) -> str:
    pruner = study.pruner
    why = pruner.reasons.get(number, "") if isinstance(pruner, ScalerlPruner) else ""
    return f"scalerl pruner at x={x:g}: {why}"


def replay_scalerl_pruner(
    runs: Sequence[RunCurve], budget: float | None = None, *, mode: str = "parallel", orders: int = 1, seed: int = 0,
    policy: Policy | None = None,
) -> ReplayResult:  # fmt: skip
    """The pruner replayed side by side (``mode="parallel"``, deterministic: one replay) or one trial after another
    (``"sequential"``, over ``orders`` random orders, the first the files' order)."""
    until = default_budget(runs) if budget is None else float(budget)
    if mode == "parallel":
        return replay(f"{NAME}-parallel", runs, side_by_side(policy), until)
    if mode == "sequential":
        return replay_sequential(f"{NAME}-sequential", runs, one_by_one(policy), until, orders=orders, seed=seed)
    raise ValueError(f"mode must be 'parallel' or 'sequential', got {mode!r}")
