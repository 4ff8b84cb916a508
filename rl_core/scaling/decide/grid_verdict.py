"""The grid's answer: which run is best, which is the runner-up, and how sure that is; one leader rule.

Every run the decision values has :data:`~rl_core.scaling.decide.grid_decisions.N_DRAWS` draws of its value at the
budget: the forecast's draws while it runs, its observation once it has reached its budget or finished
(:func:`observed_draws`). The *leader* is the run with the highest median draw among all of them, whether or not its
ceiling is identified: a run whose ceiling sits on the A = 1 bound can lead by its forecast at the budget, and a run
that has finished leads by what it observed. The ranking is that same order, so the best run is always the leader,
the runner-up is the next run of another recipe, and their difference is never negative.

Invariants: the verdict reads only the draws the stop rules read (no fit of its own); the confidence is P(best's
value > runner-up's) over independent draws (each floored at its recent level: the sigmoid never falls); a run
valued by observation has draws centred on the mean of its last evaluations with the spread of that mean under the
grid's evaluation noise, so two finished runs whose finals differ by more than about one evaluation's noise are
ranked with confidence, by observation.

:func:`contrast` answers any other pair (or pair of recipes) the same way, from the same draws: a leave-one-out
grid's base against each variant (what removing a component costs) is the best-vs-runner-up comparison on another
pair. Runs the stop rules stopped are not ranked, but they keep draws for these contrasts (their forecast at the
budget from where they stopped), so a component whose variant was stopped as dominated is still named.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rl_core.scaling.decide.grid_run import GridRun
from rl_core.scaling.fit.model import FloatArray

Basis = Literal["observed", "forecast", "none"]
#: The probability the best run must have of ending above the runner-up for the verdict to be decided (the CI gate's
#: default ``min_confidence``).
DEFAULT_CONFIDENCE = 0.9
_OBSERVED_SEED = 424242


def reached_budget(run: GridRun, points: int) -> bool:
    """A run whose value at the budget is observed: it finished (completed), or its evaluations reached its budget;
    it needs ``points`` evaluations for the mean its value is."""
    if run.x.size < points:
        return False
    if run.status == "completed":
        return True
    return run.budget is not None and float(run.x[-1]) >= float(run.budget) * (1.0 - 1e-9)


def observed_draws(run: GridRun, noise: float | None, points: int, n: int, salt: int) -> FloatArray:
    """``n`` draws of a finished run's value: the mean of its last ``points`` evaluations plus the error of that mean
    under the evaluation noise (``noise``: one evaluation's standard deviation; without it, the spread of those
    evaluations themselves)."""
    last = run.y[-points:]
    sd = noise if noise is not None else float(np.std(last, ddof=1)) if last.size > 1 else 0.0
    rng = np.random.default_rng((_OBSERVED_SEED, salt))
    return np.asarray(float(np.mean(last)) + rng.normal(0.0, sd / np.sqrt(last.size), n), dtype=np.float64)


@dataclass(frozen=True)
class GridVerdict:
    """The grid's ranking and its answer, as indices into the grid's runs."""

    order: tuple[int, ...]
    """Every run with a value at the budget, best first (the leader first)."""
    best: int | None
    runner_up: int | None
    """The highest-ranked run of another recipe than the best (``None`` with fewer than two recipes ranked)."""
    difference: float | None
    """Median value of the best minus the runner-up's (never negative)."""
    confidence: float | None
    """P(best's value at the budget > the runner-up's)."""
    basis: Basis
    """``observed`` when both were valued by observation, ``forecast`` when either was forecast."""
    others_dominated: bool
    """Every other recipe's ranked run is dominated by the stop rules, or every run of another recipe was stopped
    (then there is no runner-up: the best run is the one left)."""
    observed: frozenset[int] = frozenset()
    """The runs valued by observation."""
    waiting: tuple[int, ...] = ()
    """Live runs without a value at the budget yet: they could still win, so nothing is decided while any is left."""
    draws: Mapping[int, FloatArray] = field(default_factory=dict, repr=False, compare=False)
    """Every run's value draws at the budget: the ranked runs' and those of runs the stop rules stopped."""
    floors: Mapping[int, float] = field(default_factory=dict, repr=False, compare=False)
    """Each forecast run's recent level (its draws are floored at it when compared)."""

    def decided(self, min_confidence: float = DEFAULT_CONFIDENCE, waiting: Collection[object] | None = None) -> bool:
        """Decided at ``min_confidence`` (:func:`standing`): ``waiting`` are the runs that could still win and have
        no value at the budget (``None``: this verdict's own, :attr:`waiting`). The service passes its set (queued,
        running, stopping and resumable runs), and the replay the set the service would have."""
        left = self.waiting if waiting is None else waiting
        return standing(self.best is not None, self.confidence, self.others_dominated, min_confidence, left).decided


#: Where a verdict stands: ``no_comparison`` (no best run, or nothing to compare it with: ``decided`` is not read
#: here), ``waiting`` (a run that could still win has no value at the budget yet), ``work_spread`` (the lead could
#: be the runs' different work per compute unit), ``below`` (P(higher) under ``min_confidence`` and not every
#: other recipe dominated) or ``decided``.
State = Literal["no_comparison", "waiting", "work_spread", "below", "decided"]
#: What decided it: the probability reached ``min_confidence`` (``confidence``), or every other recipe is dominated
#: or stopped (``dominance``).
DecidedBy = Literal["confidence", "dominance"]


@dataclass(frozen=True)
class Standing:
    """The one decided rule's answer, as fields (never recovered from a sentence)."""

    state: State
    decided_by: DecidedBy | None = None
    early: bool = False
    """Decided although runs were waiting (``decide_early``)."""

    @property
    def decided(self) -> bool:
        return self.state == "decided"


def standing(
    has_best: bool,
    confidence: float | None,
    others_dominated: bool,
    min_confidence: float,
    waiting: Collection[object],
    *,
    decide_early: bool = False,
    lead_holds_at_equal_work: bool | None = None,
) -> Standing:
    """The decided rule (the CI gate's, the banner's and the replay's): with a best run and either a confidence or
    every other recipe dominated, it is decided when nothing in ``waiting`` is left (unless ``decide_early``), P(best
    > runner-up) reaches ``min_confidence`` or every other recipe is dominated, and the lead is not one a spread of
    the runs' work per compute unit could explain (``lead_holds_at_equal_work`` False; ``None``: no such spread).
    Pure: it reads the numbers a stored verdict keeps."""
    if confidence is None and not (others_dominated and has_best):
        return Standing("no_comparison")
    if waiting and not decide_early:
        return Standing("waiting")
    sure = confidence is not None and confidence >= min_confidence
    if not (sure or others_dominated):
        return Standing("below")
    if lead_holds_at_equal_work is False:
        return Standing("work_spread")
    return Standing("decided", "confidence" if sure else "dominance", bool(waiting))


def p_higher(a: FloatArray, b: FloatArray) -> float:
    """P(a > b) over independent draws (already floored where they are): the one comparison of two values."""
    return float(np.mean(a > b))


@dataclass(frozen=True)
class Contrast:
    """Runs (a recipe's seeds, or one run) against a reference, on their value at the budget."""

    difference: float
    """Median value of the runs minus the reference's (negative: lower)."""
    p_higher: float
    """P(the runs' value at the budget > the reference's)."""
    basis: Basis
    """``observed`` when every run on both sides was valued by observation, else ``forecast``."""


def _group(verdict: GridVerdict, runs: Sequence[int]) -> tuple[FloatArray, FloatArray] | None:
    """A group's value draws (the mean over its runs valued: a recipe's seeds) and the same floored at each run's
    recent level; ``None`` when none of its runs has draws."""
    valued = [i for i in runs if i in verdict.draws]
    if not valued:
        return None
    raw = np.mean([verdict.draws[i] for i in valued], axis=0)
    floored = np.mean([np.maximum(verdict.draws[i], verdict.floors.get(i, -np.inf)) for i in valued], axis=0)
    return np.asarray(raw, dtype=np.float64), np.asarray(floored, dtype=np.float64)


def contrast(verdict: GridVerdict, runs: Sequence[int], reference: Sequence[int]) -> Contrast | None:
    """``runs`` against ``reference`` by the verdict's own draws and P(higher) (:func:`p_higher` of the floored
    draws, as the best run against the runner-up); either side's value is the mean over its runs that have draws.
    ``None`` when either side has none."""
    mine, theirs = _group(verdict, runs), _group(verdict, reference)
    if mine is None or theirs is None:
        return None
    both = [i for i in (*runs, *reference) if i in verdict.draws]
    basis: Basis = "observed" if all(i in verdict.observed for i in both) else "forecast"
    diff = float(np.median(mine[0])) - float(np.median(theirs[0]))
    return Contrast(diff, p_higher(mine[1], theirs[1]), basis)


def rank_runs(draws: Mapping[int, FloatArray]) -> tuple[int, ...]:
    """Runs by the median of their value draws, highest first (ties by index): the one ordering every surface reads."""
    return tuple(sorted(draws, key=lambda i: (-float(np.median(draws[i])), i)))


def grid_verdict(
    runs: Sequence[GridRun],
    draws: Mapping[int, FloatArray],
    floors: Mapping[int, float],
    observed: frozenset[int],
    dominated: frozenset[int],
    same_recipe: Callable[[int, int], bool],
    unranked: Mapping[int, FloatArray] | None = None,
) -> GridVerdict:
    """The verdict from the decision's value draws. ``floors``: each run's recent level (its draws are floored at
    it for the confidence); ``dominated``: runs the stop rules found dominated; ``same_recipe(i, j)``: True when run
    j is a replicate of run i (never its runner-up); ``unranked``: draws of runs that are not ranked (stopped ones),
    kept for :func:`contrast` only."""
    order = rank_runs(draws)
    waiting = tuple(i for i, r in enumerate(runs) if r.status == "live" and i not in draws)
    kept = {**(unranked or {}), **draws}
    low = dict(floors)
    if not order:
        return GridVerdict((), None, None, None, None, "none", False, observed, waiting, kept, low)
    best = order[0]
    others = [j for j in order[1:] if not same_recipe(best, j)]
    if not others:
        stopped = [j for j, r in enumerate(runs) if r.status == "stopped" and j != best and not same_recipe(best, j)]
        return GridVerdict(order, best, None, None, None, "none", bool(stopped), observed, waiting, kept, low)
    second = others[0]
    va = np.maximum(draws[best], floors.get(best, -np.inf))
    vb = np.maximum(draws[second], floors.get(second, -np.inf))
    confidence = p_higher(va, vb)
    diff = float(np.median(draws[best])) - float(np.median(draws[second]))
    basis: Basis = "observed" if best in observed and second in observed else "forecast"
    dominated_all = all(j in dominated for j in others)
    return GridVerdict(order, best, second, diff, confidence, basis, dominated_all, observed, waiting, kept, low)
