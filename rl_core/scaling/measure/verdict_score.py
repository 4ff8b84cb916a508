"""Scoring the answer users read: the verdict's named best and the advice, at every evaluation of a replay.

The stop rules are scored by compute and regret (:mod:`.replay`); this scores what the service *shows* at each
assessment (:class:`~rl_core.scaling.measure.replay.VerdictStep`), against how the grid really ended:

- *tolerance*: two runs whose finals (means of their last three evaluations) differ by less than
  :data:`TOLERANCE_Z` × the standard deviation of such a difference under the grid's evaluation noise (at least
  ``min_tolerance``) are within the noise of each other; a run within it of the grid's best final is *near-best*.
  On a grid with seeds of one recipe (:func:`~rl_core.scaling.measure.replay.replicate_key`) the unit is the recipe,
  as for the decisions: a recipe stands at the mean final of its seeds, the tolerance also covers the spread between
  seeds (the standard error of a difference of two recipe means), and a run is near-best when its recipe is;
- *decided at*: the first evaluation (as a fraction of the budget) at which the verdict is decided, and whether it
  is decided at the end;
- *named-best regret*: the grid's best final minus the final of the run the verdict names best, at its first
  decision and at the end;
- *wrong once decided*: the fraction of decided evaluations whose named best is not near-best;
- *separated*: the best final stands above every other recipe's by more than the tolerance, so the finished grid
  should be decided (by observation);
- *advice errors*: distinct near-best runs ever told to stop, and evaluations at which the verdict's own best was
  told to stop (never allowed).

Invariant: only the recorded verdicts and the runs' own finals are read; nothing is refitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.decide.matched_compute import pooled_noise
from rl_core.scaling.measure.replay import FINAL_POINTS, ReplayResult, RunCurve, replicate_key

#: How many standard deviations of a difference of two finals count as "within the noise".
TOLERANCE_Z = 1.0


@dataclass(frozen=True)
class VerdictScore:
    tolerance: float
    decided_at: float | None
    """First decided evaluation as a fraction of the budget (``None``: never decided)."""
    decided_at_end: bool
    separated: bool
    named_regret_first: float | None
    """Regret of the named best at the first decision (``None``: never decided)."""
    named_regret_end: float | None
    """Regret of the run named best at the last evaluation (``None``: no run named)."""
    wrong_once_decided: float | None
    """Fraction of decided evaluations naming a run that is not near-best (``None``: never decided)."""
    near_best_stopped: int
    """Distinct near-best runs ever told to stop."""
    leader_stops: int
    """Evaluations at which the verdict's best run was told to stop (must be 0)."""
    end_basis: str


def tolerance(runs: Sequence[RunCurve], budget: float, min_tolerance: float = 0.01) -> float:
    """Within the noise: :data:`TOLERANCE_Z` × the standard deviation of the difference of two finals (of two recipe
    means on a grid with seeds, where the spread between seeds counts too)."""
    noise = pooled_noise([(r.upto(budget).x, r.upto(budget).y) for r in runs])
    tol = (
        min_tolerance if noise is None else max(min_tolerance, TOLERANCE_Z * noise * float(np.sqrt(2.0 / FINAL_POINTS)))
    )
    groups = _recipes(runs)
    seeded = [names for names in groups.values() if len(names) >= 2]
    if not seeded:
        return tol
    finals = {r.name: r.final(budget) for r in runs}
    spread = float(np.sqrt(np.mean([np.var([finals[n] for n in names], ddof=1) for names in seeded])))
    n = float(np.mean([len(names) for names in seeded]))
    return max(tol, TOLERANCE_Z * spread * float(np.sqrt(2.0 / n)))


def _recipes(runs: Sequence[RunCurve]) -> dict[str, list[str]]:
    """Runs by recipe (a run without a seed suffix is a recipe of its own)."""
    out: dict[str, list[str]] = {}
    for r in runs:
        out.setdefault(replicate_key(r.name) or f"run:{r.name}", []).append(r.name)
    return out


def score_verdicts(result: ReplayResult, runs: Sequence[RunCurve], min_tolerance: float = 0.01) -> VerdictScore | None:
    """The score of ``result``'s recorded verdicts (``None`` for a policy that records none)."""
    steps = result.verdicts
    if not steps:
        return None
    budget = result.budget
    groups = _recipes(runs)
    run_final = {r.name: r.final(budget) for r in runs}
    recipe_final = {k: float(np.mean([run_final[n] for n in names])) for k, names in groups.items()}
    recipe_of = {n: k for k, names in groups.items() for n in names}
    finals = {n: recipe_final[recipe_of[n]] for n in run_final}  # each run judged by its recipe's mean
    best_final = max(finals.values())
    tol = tolerance(runs, budget, min_tolerance)
    near = {n for n, v in finals.items() if v >= best_final - tol}
    best_recipe = max(recipe_final, key=lambda k: recipe_final[k])
    rivals = [v for k, v in recipe_final.items() if k != best_recipe]
    separated = bool(rivals) and best_final - max(rivals) > tol
    decided = [s for s in steps if s.decided and s.best is not None]
    first = decided[0] if decided else None
    last = steps[-1]
    stopped_near = {n for s in steps for n in s.stop if n in near}
    return VerdictScore(
        tolerance=tol,
        decided_at=None if first is None else min(first.x / budget, 1.0),
        decided_at_end=last.decided,
        separated=separated,
        named_regret_first=None if first is None or first.best is None else best_final - finals[first.best],
        named_regret_end=None if last.best is None else best_final - finals[last.best],
        wrong_once_decided=None if not decided else float(np.mean([s.best not in near for s in decided])),
        near_best_stopped=len(stopped_near),
        leader_stops=sum(1 for s in steps if s.best is not None and s.best in s.stop),
        end_basis=last.basis,
    )
