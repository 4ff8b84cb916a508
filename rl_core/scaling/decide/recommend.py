"""Recommendations as pure functions: what to do with a run, alone or among competing runs.

Actions: ``stop`` (the rest of the budget buys too little, the curve falls, or its ceiling is clearly below the
best run's), ``scale`` (more compute than budgeted still pays), ``continue``, ``insufficient_data`` (too few points
to fit) and ``unstable`` (a fit exists but the ceiling is not identified yet). Each comes with a readable reason
and the numbers behind it. Decisions among the runs of a grid are :mod:`.grid_decisions`; the thresholds are
:mod:`.policy`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.questions import gain_from_scaling
from rl_core.scaling.fit.summary import on_bound, summarize

Action = Literal["stop", "scale", "continue", "insufficient_data", "unstable", "resume"]
ACTIONS: tuple[Action, ...] = ("stop", "scale", "continue", "insufficient_data", "unstable", "resume")


@dataclass(frozen=True)
class RunState:
    """What a recommendation looks at: the run's latest fit, the compute it used and its budget."""

    run_id: str
    fit: CurveFit
    compute_used: float
    budget: float | None = None


@dataclass(frozen=True)
class Recommendation:
    run_id: str
    action: Action
    reason: str
    numbers: dict[str, float | None] = field(default_factory=dict)
    rule: str = ""
    """Which rule decided (e.g. ``falling``, ``plateau``, ``dominated``, ``threshold``); empty for no decision."""


def _ceiling_numbers(fit: CurveFit, max_ceiling_width: float) -> dict[str, float | None]:
    """The fit's one posterior summary (:func:`rl_core.scaling.fit.summary.summarize`: every estimate inside its
    interval), whether the ceiling is identified, and how many points it saw: what a page shows beside the
    decision."""
    summary = summarize(fit, max_ceiling_width)
    numbers: dict[str, float | None] = {}
    for name in ("A", "B", "C_mid"):
        est = summary.estimates[name]
        numbers.update({name: est.value, f"{name}_lo": est.lo, f"{name}_hi": est.hi})
    numbers["R0"] = summary.value("R0")
    numbers["ceiling_identified"] = 1.0 if summary.ceiling_identified else 0.0
    numbers["n_points"] = float(fit.n_points)
    numbers["compute_max"] = float(fit.compute_max)
    return numbers


def _why_unidentified(fit: CurveFit, numbers: dict[str, float | None], policy: Policy) -> str:
    """Which part of *identified* (:attr:`rl_core.scaling.fit.summary.FitSummary.ceiling_identified`) fails."""
    a_lo, a_hi = numbers["A_lo"], numbers["A_hi"]
    span = "" if a_lo is None or a_hi is None else f"A in [{a_lo:.2f}, {a_hi:.2f}] at {fit.level:.0%}"
    if on_bound(fit):
        return f"the fitted ceiling sits on the A = 1 bound ({span})" if span else "the fitted ceiling is on the bound"
    if a_lo is not None and a_hi is not None and a_hi - a_lo > policy.max_ceiling_width:
        return f"{span}, wider than {policy.max_ceiling_width:g}"
    return f"the point fit lies outside its own interval ({span}): a ridge of near-equal fits"


def recommend_run(state: RunState, policy: Policy | None = None) -> Recommendation:
    """Recommendation for one run on its own."""
    pol = policy or Policy()
    fit, rid = state.fit, state.run_id
    numbers = _ceiling_numbers(fit, pol.max_ceiling_width)
    numbers["compute_used"] = float(state.compute_used)
    numbers["budget"] = None if state.budget is None else float(state.budget)
    if fit.params is None or not fit.usable:
        return Recommendation(rid, "insufficient_data", fit.message, numbers)
    if fit.status == "decreasing":
        return Recommendation(rid, "stop", f"pass rate is falling: {fit.message}", numbers, "falling")
    if fit.status == "ok" and not numbers["ceiling_identified"]:
        reason = (
            f"ceiling not identified yet: {_why_unidentified(fit, numbers, pol)}; collect more points before deciding"
        )
        return Recommendation(rid, "unstable", reason, numbers, "unidentified")
    budget = state.budget
    if budget is not None and budget > state.compute_used:
        rest = gain_from_scaling(fit, state.compute_used, budget / max(state.compute_used, 1e-300))
        if rest is not None:
            numbers.update(remaining_gain=rest.gain, remaining_gain_hi=rest.hi, predicted_at_budget=rest.after)
            optimistic = rest.hi if rest.hi is not None else rest.gain
            if optimistic < pol.min_gain:
                reason = (
                    f"plateaued: the remaining budget buys {rest.gain:+.3f} (at most {optimistic:+.3f}) "
                    f"< {pol.min_gain}; predicted {rest.after:.3f} at budget vs ceiling {numbers['A']:.3f}"
                )
                return Recommendation(rid, "stop", reason, numbers, "plateau")
    horizon = max(budget or 0.0, state.compute_used)
    if horizon > 0:
        more = gain_from_scaling(fit, horizon, pol.scale_factor)
        if more is not None:
            numbers.update(scale_gain=more.gain, scale_gain_lo=more.lo, predicted_scaled=more.after)
            lo_ok = more.lo is None or more.lo > 0
            if more.gain >= pol.scale_gain and lo_ok:
                reason = (
                    f"{pol.scale_factor:g}x the compute ({horizon * pol.scale_factor:.4g}) is predicted to add "
                    f"{more.gain:+.3f} (to {more.after:.3f}); ceiling A={numbers['A']:.3f}"
                )
                return Recommendation(rid, "scale", reason, numbers, "scale")
    if fit.status == "flat":
        return Recommendation(rid, "stop", f"no gain: {fit.message}", numbers, "flat")
    return Recommendation(rid, "continue", f"on track: ceiling A={numbers['A']:.3f}, B={numbers['B']:.3g}", numbers)
