"""The grid comparison's stop rules as objects: each answers ``candidates(ctx)`` (runs it would stop, with their
recommendation) over one :class:`StopContext`, as each of Optuna's pruners answers ``prune(study, trial)``.

The rules, in the order they propose (:data:`STOP_RULES`): :class:`ValueAtBudget` (*dominated*, *cannot matter*),
:class:`Behind` and :class:`Rung` (observed values at equal compute, :mod:`.equal_compute_stops`) and
:class:`ComputeTarget` (:mod:`.compute_target`). :class:`MinLive` wraps them: it asks each in turn (a rule never
proposes a run an earlier one took: ``ctx.taken``) and keeps the stops, lowest value first, while more than
``policy.min_live`` runs stay live.

Invariants: no rule stops a protected run (the compute target protects the leader only), a run that is not live, or
a run its own forecast already stops; the candidates of one decision name each run once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from rl_core.scaling.decide.compute_target import compute_target_candidates
from rl_core.scaling.decide.equal_compute_stops import (
    Candidate,
    EqualComputeInputs,
    behind_candidates,
    rung_candidates,
)
from rl_core.scaling.decide.fallen import Fall
from rl_core.scaling.decide.grid_run import (
    GridRun,
    best_of,
    expected_gain,
    floored_at_recent,
    on_bound,
    rivals,
)
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.model import FloatArray


def fall_note(fall: Fall | None) -> str:
    """How a capped forecast is marked in a reason (:mod:`.fallen`)."""
    if fall is None:
        return ""
    return f" (capped at its recent level {fall.recent:.3f}: fell {fall.drop:.3f} from its peak {fall.peak:.3f})"


@dataclass(frozen=True)
class StopContext:
    """What every stop rule reads of one decision (indices are positions in ``runs``)."""

    runs: Sequence[GridRun]
    fits: Sequence[CurveFit]
    own: Sequence[Recommendation]
    """Each run's own recommendation (its forecast's)."""
    numbers: Sequence[Mapping[str, float | None]]
    """Each run's numbers so far (its value at the budget among them)."""
    policy: Policy
    draws: Mapping[int, FloatArray]
    """Every valued run's draws of its value at the budget."""
    comparators: Sequence[int]
    precise: frozenset[int]
    """Comparators whose value is precise (observed, or the ceiling identified): the expected-gain rule's."""
    lead: int | None
    """The leader: the highest median value at the budget among every run valued."""
    protected: frozenset[int]
    falls: Mapping[int, Fall | None]
    noise: float | None
    recent_points: int
    taken: tuple[Candidate, ...] = ()
    """Candidates earlier rules proposed."""
    notes: dict[int, dict[str, float | None]] = field(default_factory=dict)
    """Numbers a rule records on runs it compared but does not stop (kept on their recommendations)."""

    @property
    def taken_runs(self) -> frozenset[int]:
        return frozenset(i for _, i, _ in self.taken)

    def equal_compute(self) -> EqualComputeInputs:
        fallen = frozenset(i for i, fell in self.falls.items() if fell is not None)
        inputs = EqualComputeInputs(
            self.runs, self.fits, self.draws, self.comparators, self.protected, self.own, frozenset(), self.policy,
            self.noise, fallen,
        )  # fmt: skip
        return inputs.with_taken(self.taken)


class StopRule(Protocol):
    """One stop rule: the runs it would stop in ``ctx``, each as (its value, its index, its recommendation)."""

    def candidates(self, ctx: StopContext) -> list[Candidate]: ...


class ValueAtBudget:
    """*dominated*: P(V_i < V_j - margin) >= ``p_stop`` for some comparator j; *cannot matter*: E[max(V_i - V_lead,
    0)] < ``min_expected_gain`` with both values precise. The run's draws are floored at its recent level (only a
    harder stop). Runs compared but not stopped keep the comparison's numbers (``ctx.notes``)."""

    def candidates(self, ctx: StopContext) -> list[Candidate]:
        runs, draws, policy, medians = (
            ctx.runs,
            ctx.draws,
            ctx.policy,
            {i: float(np.median(v)) for i, v in ctx.draws.items()},
        )
        comparator_lead = best_of(list(ctx.comparators), medians) if ctx.comparators else None
        out: list[Candidate] = []
        for i, v in draws.items():
            run = runs[i]
            if comparator_lead is None or i in ctx.protected or run.status != "live" or ctx.own[i].action == "stop":
                continue
            others = rivals(runs, ctx.comparators, i, policy)
            if not others:
                continue
            lead_i = best_of(others, medians)
            v, recent = floored_at_recent(run, v, ctx.recent_points)
            p_below = {j: float(np.mean(v < draws[j] - policy.value_margin)) for j in others}
            j_star = max(p_below, key=lambda j: p_below[j])
            gain = expected_gain(v, draws[lead_i])
            numbers = {
                **ctx.numbers[i],
                "p_below": p_below[j_star],
                "expected_gain_over_leader": gain,
                "leader_V_budget": float(np.median(draws[lead_i])),
                "recent_level": recent,
            }
            forecast = float(np.median(draws[i]))
            floor_note = (
                f" (floored at its recent level {recent:.3f})" if recent > forecast else fall_note(ctx.falls[i])
            )
            name_j = runs[j_star].label
            name_lead = f"{'the leader' if lead_i == ctx.lead else 'the best other recipe'} {runs[lead_i].label}"
            if p_below[j_star] >= policy.p_stop:
                rule = "dominated"
                reason = (
                    f"dominated: P(value at budget < {name_j}'s − {policy.value_margin:g}) = {p_below[j_star]:.2f} "
                    f"≥ {policy.p_stop:g}; forecast at budget {numbers['V_budget']:.3f}{floor_note} vs "
                    f"{float(np.median(draws[j_star])):.3f}{fall_note(ctx.falls[j_star])}"
                )
            elif (
                gain < policy.min_expected_gain
                and i in ctx.precise
                and lead_i in ctx.precise
                and not on_bound(ctx.fits[i])
            ):
                rule = "cannot_matter"
                reason = (
                    f"cannot matter: expected gain over {name_lead} is {gain:.4f} < "
                    f"{policy.min_expected_gain:g}; forecast at budget {numbers['V_budget']:.3f}{floor_note} vs "
                    f"{numbers['leader_V_budget']:.3f}"
                )
            else:
                ctx.notes[i] = numbers
                continue
            out.append((float(np.median(v)), i, Recommendation(run.run_id, "stop", reason, numbers, rule)))
        return out


class Behind:
    """*behind*: trailing another run at equal compute by more than the grid's noise allows
    (:mod:`.matched_compute`)."""

    def candidates(self, ctx: StopContext) -> list[Candidate]:
        return behind_candidates(ctx.equal_compute())


class Rung:
    """*rung*: successive halving, outside the top 1/η of the recipes at an ASHA rung (:mod:`.rungs`)."""

    def candidates(self, ctx: StopContext) -> list[Candidate]:
        return rung_candidates(ctx.equal_compute())


class ComputeTarget:
    """The compute target (:mod:`.compute_target`): it protects the leader alone (a user who sets it accepts that
    the runner-up may be stopped)."""

    def candidates(self, ctx: StopContext) -> list[Candidate]:
        leader_only = frozenset() if ctx.lead is None else frozenset({ctx.lead})
        taken = set(ctx.taken_runs)
        return compute_target_candidates(
            ctx.runs, ctx.draws, leader_only, ctx.own, taken, ctx.policy, ctx.recent_points
        )


@dataclass(frozen=True)
class MinLive:
    """``rules`` asked in turn, each seeing the candidates before it; their stops kept, lowest value first, while
    more than ``policy.min_live`` runs stay live."""

    rules: Sequence[StopRule]

    def candidates(self, ctx: StopContext) -> list[Candidate]:
        found: list[Candidate] = []
        for rule in self.rules:
            found += rule.candidates(replace(ctx, taken=(*ctx.taken, *found)))
        n_live = sum(1 for r in ctx.runs if r.status == "live")
        room = max(0, n_live - ctx.policy.min_live)
        return sorted(found, key=lambda c: c[0])[:room]


#: The grid comparison's stop rules, in the order they propose.
STOP_RULES: StopRule = MinLive((ValueAtBudget(), Behind(), Rung(), ComputeTarget()))
