"""Stops from observed values at equal compute, for live runs the forecast comparison did not stop: *behind*
(:mod:`.matched_compute`) and *rung* (:mod:`.rungs`, successive halving).

Invariants (both rules): only observed points decide; the protected runs (the verdict's leader and the best
comparator, :mod:`.grid_decisions`) are never stopped, nor a run whose own identified forecast puts it within
``value_margin`` of the best other recipe's; a run is never measured against its own replicates; the reason is
written from the numbers stored beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rl_core.scaling.decide.grid_run import GridRun, identified, medians_of, replicates, rivals
from rl_core.scaling.decide.matched_compute import behind_at_equal_compute, seed_spread
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation
from rl_core.scaling.decide.rungs import standing
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.model import FloatArray

Candidate = tuple[float, int, Recommendation]
"""A proposed stop: the run's level (lowest first when ``min_live`` limits how many may stop), its index, and the
recommendation."""


@dataclass(frozen=True)
class EqualComputeInputs:
    """What both equal-compute rules read, built once per decision by :mod:`.grid_decisions`.

    ``runs`` and ``fits`` are the grid's runs and current fits, in order; ``draws`` every valued run's draws of its
    value at the budget; ``comparators`` the runs that may stop another; ``protected`` the runs no grid rule stops
    (the leader and the best comparator); ``own`` each run's own recommendation; ``taken`` the runs an earlier
    rule already proposed to stop; ``policy`` the thresholds; ``noise`` the grid's pooled evaluation noise
    (:func:`.matched_compute.pooled_noise`; ``None``: the *behind* rule decides nothing); ``fallen`` the runs fallen
    from their peak (:mod:`.fallen`), which are no comparators at equal compute."""

    runs: Sequence[GridRun]
    fits: Sequence[CurveFit]
    draws: Mapping[int, FloatArray]
    comparators: Sequence[int]
    protected: frozenset[int]
    own: Sequence[Recommendation]
    taken: frozenset[int]
    policy: Policy
    noise: float | None = None
    fallen: frozenset[int] = frozenset()

    def with_taken(self, candidates: Sequence[Candidate]) -> EqualComputeInputs:
        """The same inputs with the runs of ``candidates`` added to ``taken``."""
        return replace(self, taken=self.taken | {i for _, i, _ in candidates})


def behind_candidates(inputs: EqualComputeInputs) -> list[Candidate]:
    """Stops by the observed gap at equal compute (:mod:`.matched_compute`) for live runs the
    forecast comparison did not stop. A run whose own identified forecast puts it within ``value_margin`` of the
    leader's is kept (the forecast says it catches up), and the forecast leader is never stopped. ``noise`` is the
    grid's pooled evaluation noise (:func:`.matched_compute.pooled_noise`; ``None``: no verdict).
    Runs in ``fallen`` (:mod:`.fallen`) are no comparators: where they stood at equal compute is not
    where they end."""
    runs, fits, draws, comparators = inputs.runs, inputs.fits, inputs.draws, inputs.comparators
    protected, own, taken, policy = inputs.protected, inputs.own, inputs.taken, inputs.policy
    noise, fallen = inputs.noise, inputs.fallen
    rule = policy.behind
    if rule is None or noise is None:
        return []
    curves = [(r.x, r.y) for r in runs]
    recipes = [r.config if not policy.rank_replicates else None for r in runs]
    medians = medians_of(draws)
    live_pool = [j for j, r in enumerate(runs) if r.status != "stopped" and r.x.size >= 2 and j not in fallen]
    out: list[Candidate] = []
    for i, run in enumerate(runs):
        if run.status != "live" or i in protected or i in taken or own[i].action == "stop" or run.x.size < 2:
            continue
        pool = [j for j in live_pool if not replicates(run, runs[j], policy)]  # never behind its own replicates
        if _catches_up(runs, fits, medians, comparators, i, policy):
            continue  # its own identified forecast says it reaches the leader
        seeds = seed_spread(curves, recipes, float(run.x[-1]))
        b = behind_at_equal_compute(curves, i, pool, noise, rule.margin, rule.z, rule.points, seeds, policy.seed_z)
        if b is None or not b.is_behind:
            continue
        numbers = {**own[i].numbers, **b.numbers()}
        if b.seed_spread is not None:
            scale = f"{policy.seed_z:g} × seed spread {b.seed_spread:.3f} × √2"
        else:
            scale = f"{rule.z:g} × noise {b.noise:.3f} × √(2/{b.points})"
        reason = (
            f"behind at equal compute: {b.gap:.3f} below {runs[b.comparator].label} over its last {b.points} "
            f"evaluation{'s' if b.points > 1 else ''} (> {b.threshold:.3f} = margin {rule.margin:g} + "
            f"{scale})"
        )
        level = float(np.mean(run.y[-b.points :]))
        out.append((level, i, Recommendation(run.run_id, "stop", reason, numbers, "behind")))
    return out


def _catches_up(
    runs: Sequence[GridRun],
    fits: Sequence[CurveFit],
    medians: Mapping[int, float],
    comparators: Sequence[int],
    i: int,
    policy: Policy,
) -> bool:
    """Run ``i``'s own identified forecast puts it within ``value_margin`` of the best rival's forecast (``medians``:
    each valued run's median value draw, :func:`.grid_run.medians_of`)."""
    lead_v = max((medians[j] for j in rivals(runs, comparators, i, policy)), default=None)
    return (
        lead_v is not None
        and i in medians
        and identified(fits[i], policy)
        and medians[i] >= lead_v - policy.value_margin
    )


def rung_candidates(inputs: EqualComputeInputs) -> list[Candidate]:
    """Stops by successive halving at equal compute (:mod:`.rungs`) for live runs no other rule
    stopped, with the same guards as the gap rule: the forecast leader and a run whose identified forecast catches
    up are kept, and runs in ``fallen`` do not stand at the rungs."""
    runs, fits, draws, comparators = inputs.runs, inputs.fits, inputs.draws, inputs.comparators
    protected, own, taken, policy, fallen = inputs.protected, inputs.own, inputs.taken, inputs.policy, inputs.fallen
    rule = policy.rung
    if rule is None:
        return []
    curves = [(r.x[:0], r.y[:0]) if j in fallen else (r.x, r.y) for j, r in enumerate(runs)]
    medians = medians_of(draws)
    recipes = [r.config if r.config is not None and not policy.rank_replicates else f"run:{r.run_id}" for r in runs]
    out: list[Candidate] = []
    for i, run in enumerate(runs):
        if run.status != "live" or i in protected or i in taken or own[i].action == "stop" or run.budget is None:
            continue
        if _catches_up(runs, fits, medians, comparators, i, policy):
            continue
        s = standing(
            curves,
            recipes,
            i,
            float(run.budget),
            rule.eta,
            policy.min_fraction,
            rule.margin,
            policy.seed_z,
        )
        if s is None or not s.outside:
            continue
        numbers = {**own[i].numbers, **s.numbers()}
        whose = f"its recipe's mean over {s.seeds} seeds" if s.seeds > 1 else "its value"
        others = "the other recipe there stands" if s.recipes == 2 else f"the other {s.recipes - 1} recipes there stand"
        above = others if s.recipes == 2 else f"{s.above} of {others}"
        reason = (
            f"successive halving: at {s.rung:.0%} of the budget {whose} is {s.value:.3f}, and {above} higher by "
            f"more than {rule.margin:g}"
            + (
                f" + {policy.seed_z:g} × seed spread {s.seed_spread:.3f} × √(1/n + 1/m) (n, m: the recipes' seeds)"
                if s.seed_spread is not None
                else ""
            )
            + f"; only the top {s.keep} of {s.recipes} go on (η = {rule.eta:g})"
        )
        out.append((s.value, i, Recommendation(run.run_id, "stop", reason, numbers, "rung")))
    return out
