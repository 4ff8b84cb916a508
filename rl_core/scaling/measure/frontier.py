"""A compute–regret frontier: scalerl at several ``compute_target`` settings beside each Optuna pruner's settings.

A *point* is one policy setting replayed on a set of grids: its mean compute, mean regret and worst regret over
them, and how many runs it stopped that end within the noise of the best (near-best stops: the runner-up told to
stop early). A frontier is the points of one policy over its settings. :func:`compare` asks, for every pruner
point, whether scalerl has a setting that spends no more mean compute for no more mean regret.

Invariants: the replays are :mod:`.replay`'s (scalerl through :func:`~.replay.scalerl_policy`, the pruners through
Optuna's own API); nothing here refits; the numbers of a point are plain means over the grids given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rl_core.scaling.decide.grid_decisions import GridFitter
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.resume import REASON_PREFIXES
from rl_core.scaling.measure.replay import (
    ReplayResult,
    RunCurve,
    default_budget,
    evaluation_times,
    replay,
    replicate_key,
    scalerl_policy,
)
from rl_core.scaling.measure.replay_optuna import PrunerSettings, replay_pruner
from rl_core.scaling.measure.verdict_score import tolerance

#: The settings of ``Policy.compute_target`` a frontier replays, None first (the rules alone: today's default; the
#: knob at 0.5 is the same policy). Above 0.5 the knob holds stops back, below it cuts runs
#: (:mod:`rl_core.scaling.decide.compute_target`).
TARGETS: tuple[float | None, ...] = (None, 1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.4, 0.3, 0.2, 0.1, 0.05)
#: Each pruner's settings on its frontier, with the mode it is replayed in: ASHA and Hyperband side by side (as
#: scalerl runs a grid) over reduction factors and minimum resources (a fraction of the evaluation times), the
#: median rule one trial after another (side by side it never prunes) over its warm-up (a fraction of the budget).
PRUNER_SETTINGS: tuple[tuple[str, str, PrunerSettings], ...] = (
    *(
        ("asha", "parallel", PrunerSettings(reduction_factor=rf, min_resource=m))
        for rf in (2, 3, 4)
        for m in (1 / 27, 1 / 9, 1 / 3)
    ),
    *(
        ("hyperband", "parallel", PrunerSettings(reduction_factor=rf, min_resource=m))
        for rf in (2, 3, 4)
        for m in (1 / 27, 1 / 9)
    ),
    *(("median", "sequential", PrunerSettings(warmup=w)) for w in (0.05, 0.1, 0.2, 0.3, 0.5)),
)


@dataclass(frozen=True)
class Setting:
    """One policy setting: ``policy`` (``scalerl`` or ``optuna-<kind>``), its ``label`` and replay ``mode``."""

    policy: str
    label: str
    mode: str = "parallel"


@dataclass(frozen=True)
class GridScore:
    """One setting on one grid."""

    grid: str
    compute: float
    regret: float
    regret_worst: float
    near_best_stops: int
    near_best_rules: Mapping[str, int] = field(default_factory=dict)
    """The near-best stops by the rule that made them (:func:`stop_rule`)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "grid": self.grid,
            "compute": self.compute,
            "regret": self.regret,
            "regret_worst": self.regret_worst,
            "near_best_stops": self.near_best_stops,
            "near_best_rules": dict(self.near_best_rules),
        }


@dataclass(frozen=True)
class Point:
    """One setting over a set of grids."""

    setting: Setting
    grids: int
    compute: float
    regret: float
    regret_worst: float
    worst_grid: str
    near_best_stops: int
    near_best_grids: int
    near_best_rules: Mapping[str, int] = field(default_factory=dict)


#: How the reason of each of scalerl's grid rules starts (a replay keeps a stop's reason, not its rule).
RULE_PREFIXES = (
    *REASON_PREFIXES.items(),
    ("compute target", "compute_target"),
    ("pass rate is falling", "falling"),
)


def stop_rule(reason: str | None) -> str:
    """The rule a stop's reason was written by (:data:`RULE_PREFIXES`): ``rung``, ``dominated``, ...; ``pruner``
    for Optuna's pruners' reasons and ``other`` for scalerl's other rules."""
    text = reason or ""
    if text.startswith("optuna"):
        return "pruner"
    return next((rule for prefix, rule in RULE_PREFIXES if text.startswith(prefix)), "other")


def recipe_finals(result: ReplayResult, runs: Sequence[RunCurve]) -> tuple[dict[str, float], float]:
    """Each run's recipe value (the mean final value of its seeds; a run without replicates is its own recipe), by
    run name, and the best recipe's."""
    finals = {r.name: r.final(result.budget) for r in runs}
    groups: dict[str, list[str]] = {}
    for name in finals:
        groups.setdefault(replicate_key(name) or f"run:{name}", []).append(name)
    recipe = {k: float(np.mean([finals[n] for n in ns])) for k, ns in groups.items()}
    return {n: recipe[k] for k, ns in groups.items() for n in ns}, max(recipe.values())


def near_best_stopped(result: ReplayResult, runs: Sequence[RunCurve]) -> list[tuple[str, str]]:
    """(run, rule) of every run the replay stopped (first order, for the pruners) whose recipe ends within the
    grid's tolerance (:func:`.verdict_score.tolerance`) of the best recipe: the runner-up told to stop early."""
    value, best = recipe_finals(result, runs)
    tol = tolerance(runs, result.budget)
    return [
        (o.name, stop_rule(o.reason)) for o in result.runs if o.stopped_at is not None and value[o.name] >= best - tol
    ]


def near_best_stops(result: ReplayResult, runs: Sequence[RunCurve]) -> int:
    """How many near-best runs the replay stopped (:func:`near_best_stopped`)."""
    return len(near_best_stopped(result, runs))


def score(grid: str, result: ReplayResult, runs: Sequence[RunCurve]) -> GridScore:
    """A replay's numbers on one grid."""
    worst = result.regret if result.regret_worst is None else result.regret_worst
    near = near_best_stopped(result, runs)
    by_rule: dict[str, int] = {}
    for _, rule in near:
        by_rule[rule] = by_rule.get(rule, 0) + 1
    return GridScore(grid, result.compute, result.regret, worst, len(near), by_rule)


def target_label(target: float | None) -> str:
    """How a frontier names scalerl's setting: ``default`` (no ``compute_target``) or ``target 0.3``."""
    return "default" if target is None else f"target {target:g}"


def scalerl_frontier(
    grid: str,
    runs: Sequence[RunCurve],
    targets: Iterable[float | None] = TARGETS,
    fitter: GridFitter | None = None,
    base: Policy | None = None,
    budget: float | None = None,
) -> list[tuple[Setting, GridScore]]:
    """scalerl's enacted stops (``auto_stop``) at every ``compute_target`` in ``targets`` (None: the rules alone)
    on one grid; one fitter serves every setting (its memo of fits is shared: settings agree until their first
    different stop)."""
    pol = base or Policy()
    out = []
    for target in targets:
        policy = replace(pol, compute_target=target)
        result = replay("scalerl", runs, scalerl_policy(policy, fitter=fitter), budget)
        out.append((Setting("scalerl", target_label(target)), score(grid, result, runs)))
    return out


def pruner_frontier(
    grid: str,
    runs: Sequence[RunCurve],
    orders: int = 5,
    settings: Iterable[tuple[str, str, PrunerSettings]] = PRUNER_SETTINGS,
    budget: float | None = None,
) -> list[tuple[Setting, GridScore]]:
    """Every pruner setting on one grid, each averaged over ``orders`` random orders (Optuna's own pruners)."""
    out = []
    for kind, mode, cfg in settings:
        result = replay_pruner(kind, runs, budget, mode=mode, orders=orders, settings=cfg)
        out.append((Setting(f"optuna-{kind}", cfg.label(kind), mode), score(grid, result, runs)))
    return out


def summarise(setting: Setting, scores: Sequence[GridScore]) -> Point:
    """The setting's point over ``scores`` (one per grid, not empty)."""
    worst = max(scores, key=lambda s: s.regret_worst)
    return Point(
        setting,
        len(scores),
        float(np.mean([s.compute for s in scores])),
        float(np.mean([s.regret for s in scores])),
        worst.regret_worst,
        worst.grid,
        sum(s.near_best_stops for s in scores),
        sum(1 for s in scores if s.near_best_stops),
        _total_rules(scores),
    )


def _total_rules(scores: Sequence[GridScore]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in scores:
        for rule, k in s.near_best_rules.items():
            out[rule] = out.get(rule, 0) + k
    return out


def points(table: Mapping[Setting, Sequence[GridScore]], keep: Callable[[str], bool]) -> list[Point]:
    """Every setting's point over the grids ``keep`` accepts (settings without such a grid are left out)."""
    out = []
    for setting, scores in table.items():
        sub = [s for s in scores if keep(s.grid)]
        if sub:
            out.append(summarise(setting, sub))
    return out


#: How far apart two means may be and still count as equal when compared: floating-point noise of averaging, not
#: a margin (a mean of 52 fractions carries errors near 1e-16).
NOISE = 1e-9


def at_compute(scalerl: Sequence[Point], level: float) -> Point | None:
    """scalerl's setting with the lowest mean regret at mean compute <= ``level`` (``None`` if none)."""
    within = [s for s in scalerl if s.compute <= level + NOISE]
    return min(within, key=lambda s: (s.regret, s.compute)) if within else None


#: Where the oracle's floor judges from: 0 (the grid's first evaluation after any training: no rule judges earlier)
#: and the pruners' minimum resources on the frontier (1/27, 1/9, 1/3; the pruners count them in evaluations, the
#: floor in compute).
FLOOR_STARTS: tuple[float, ...] = (0.0, 1 / 27, 1 / 9, 1 / 3)


def oracle_floor(runs: Sequence[RunCurve], start: float, budget: float | None = None) -> float:
    """The least compute (a fraction of the grid's runs x budget) any rule that keeps one run to the budget and
    judges from ``start`` x the budget on can spend: an oracle keeps the run that ends best and stops every other at
    the grid's first evaluation after any training at or after ``start`` x the budget (the budget itself if none
    comes earlier). Its regret is 0; no frontier point spends less with a run finished."""
    end = default_budget(runs) if budget is None else budget
    times = evaluation_times(runs, end)
    at = times[(times > 0) & (times >= start * end)]
    stop = float(at[0]) if at.size else end
    return (end + stop * (len(runs) - 1)) / (end * len(runs))


def grid_floors(
    runs: Sequence[RunCurve], starts: Iterable[float] = FLOOR_STARTS, budget: float | None = None
) -> dict[float, float]:
    """The grid's :func:`oracle_floor` at each start, by start (``bench/frontier_floor.py``'s table and the distance
    of ``bench/replay_frontier.py``'s points to the floor read the same numbers)."""
    return {s: oracle_floor(runs, s, budget) for s in starts}
