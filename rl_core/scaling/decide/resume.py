"""Freeze-thaw: bring back a run the grid comparison stopped once the runs that justified the stop fall below it.

A stop by the grid comparison (``dominated``, ``cannot_matter``, ``behind``, ``rung``) is a bet on the *other*
runs: that one of them will end higher. When the leader later collapses (a recipe that learns fast and then decays),
the bet is lost, and the stopped run, whose points have not changed, may now be the best forecast in the grid. This
module proposes to resume such runs (the idea of freeze-thaw Bayesian optimisation: paused runs stay candidates).

Rule, for a run with ``status == "stopped"`` and ``stop_rule`` in :data:`RESUMABLE_RULES`:
its fit must be usable, ``ok`` and off the A = 1 bound (a ceiling on the bound is not evidence of anything); its
value draws at the budget, floored at its recent level as in the stop rule, must stand above the best rival's
(other recipes' live or completed comparators) with probability at least ``policy.resume.p``, and its expected gain
over that rival, E[max(V_i - V_rival, 0)], must be at least ``policy.resume.gain``; and the policy must have
resumed it fewer than ``policy.resume.max_resumes`` times (``GridRun.resumes``). A run that meets the rule but has used
its resumes gets ``stop`` with rule ``resume_limit`` (it stays stopped, and the reason says why and how to go on).

Invariants: a run stopped by anything else (a user, a failure, an observed-value rule such as threshold or
divergence, its own forecast) is never resumed; with ``resume.p`` above 1 − ``p_stop`` and ``resume.gain`` above
``min_expected_gain`` no run can be both stopped and resumed on the same numbers (a stop needs P(below by more than
the margin) >= ``p_stop`` or an expected gain below ``min_expected_gain``); the reason is written from the numbers
stored beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rl_core.scaling.decide.grid_run import (
    GridRun,
    best_of,
    expected_gain,
    floored_at_recent,
    medians_of,
    on_bound,
    rivals,
)
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.model import FloatArray

#: The stop rules whose stop a later resume may undo: the ones that bet on other runs.
RESUMABLE_RULES = frozenset({"dominated", "cannot_matter", "behind", "rung"})
#: How each resumable rule's reason starts (the service stores the reason, not the rule, with a stop).
REASON_PREFIXES = {
    "dominated:": "dominated",
    "cannot matter:": "cannot_matter",
    "behind at equal compute:": "behind",
    "successive halving:": "rung",
}


def resumable_rule(reason: str) -> str | None:
    """The resumable rule a stop's reason was written by (:data:`REASON_PREFIXES`), or ``None``."""
    return next((rule for prefix, rule in REASON_PREFIXES.items() if reason.startswith(prefix)), None)


def resume_candidates(
    runs: Sequence[GridRun],
    fits: Sequence[CurveFit],
    draws: Mapping[int, FloatArray],
    comparators: Sequence[int],
    stopped_draws: Mapping[int, FloatArray],
    recent_points: int,
    policy: Policy,
) -> dict[int, Recommendation]:
    """Resume recommendations by run index. ``draws`` are the live and completed runs' value draws at their
    budgets, ``comparators`` those of them that may serve as comparators, ``stopped_draws`` the stopped runs' draws."""
    rule = policy.resume
    if rule is None:
        return {}
    out: dict[int, Recommendation] = {}
    medians = medians_of(draws)
    for i, v in stopped_draws.items():
        run, fit = runs[i], fits[i]
        if run.status != "stopped" or run.stop_rule not in RESUMABLE_RULES or run.x.size == 0:
            continue
        if fit.status != "ok" or on_bound(fit):
            continue
        others = rivals(runs, comparators, i, policy)
        if not others:
            continue
        lead = best_of(others, medians)
        floored, recent = floored_at_recent(run, v, recent_points)
        p_above = float(np.mean(floored > draws[lead]))
        gain = expected_gain(floored, draws[lead])
        if p_above < rule.p or gain < rule.gain:
            continue
        med, lead_med = float(np.median(floored)), float(np.median(draws[lead]))
        numbers: dict[str, float | None] = {
            "V_budget": med,
            "p_above_leader": p_above,
            "expected_gain_over_leader": gain,
            "leader_V_budget": lead_med,
            "recent_level": recent,
        }
        why = (
            f"stopped ({run.stop_rule}), but now P(value at budget > {runs[lead].label}'s) = {p_above:.2f} "
            f"≥ {rule.p:g} and expected gain {gain:.4f} ≥ {rule.gain:g}; "
            f"forecast at budget {med:.3f} vs {lead_med:.3f}"
        )
        if rule.max_resumes is not None and run.resumes >= rule.max_resumes:
            limit = {**numbers, "resumes": float(run.resumes), "max_resumes": float(rule.max_resumes)}
            reason = (
                f"stays stopped: resumed {run.resumes} time{'s' if run.resumes != 1 else ''} already "
                f"(max_resumes {rule.max_resumes}), although {why}; resume it by hand to go on"
            )
            out[i] = Recommendation(run.run_id, "stop", reason, limit, "resume_limit")
            continue
        out[i] = Recommendation(run.run_id, "resume", f"resume: {why}", numbers, "resume")
    return out
