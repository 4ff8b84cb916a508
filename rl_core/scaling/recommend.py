"""Recommendations as pure functions: what to do with a run, alone or among competing runs.

Actions: ``stop`` (the rest of the budget buys too little, the curve falls, or its ceiling is clearly below the
best run's), ``scale`` (more compute than budgeted still pays), ``continue``, ``insufficient_data`` (too few points
to fit) and ``unstable`` (a fit exists but the ceiling is not identified yet). Each comes with a readable reason
and the numbers behind it. Thresholds live in :class:`Policy`; its defaults are documented in docs/forecasting.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rl_core.scaling.forecast import CurveFit
from rl_core.scaling.questions import CEILING_MARGIN, gain_from_scaling

Action = Literal["stop", "scale", "continue", "insufficient_data", "unstable"]
ACTIONS: tuple[Action, ...] = ("stop", "scale", "continue", "insufficient_data", "unstable")


@dataclass(frozen=True)
class Policy:
    """Thresholds of the recommendations (pass rates are absolute, in [0, 1])."""

    min_gain: float = 0.01
    """Stop when even the optimistic end of the band says the remaining budget buys less than this."""
    scale_factor: float = 2.0
    """Scaling is judged by the gain from ``budget`` to ``scale_factor`` × budget."""
    scale_gain: float = 0.02
    """Recommend scaling when that gain is at least this (and its lower end is positive)."""
    ceiling_margin: float = CEILING_MARGIN
    """Runs whose A differ by less than this have the same ceiling (the paper's ±0.02)."""
    max_ceiling_width: float = 0.25
    """A fit whose interval for A is wider than this has not identified its ceiling: ``unstable``."""


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


def _ceiling_numbers(fit: CurveFit) -> dict[str, float | None]:
    p = fit.params
    lo, hi = (fit.intervals or {}).get("A", (None, None))
    return {
        "A": None if p is None else p.A,
        "A_lo": lo,
        "A_hi": hi,
        "B": None if p is None else p.B,
        "C_mid": None if p is None else p.C_mid,
    }


def recommend_run(state: RunState, policy: Policy | None = None) -> Recommendation:
    """Recommendation for one run on its own."""
    pol = policy or Policy()
    fit, rid = state.fit, state.run_id
    numbers = _ceiling_numbers(fit)
    numbers["compute_used"] = float(state.compute_used)
    numbers["budget"] = None if state.budget is None else float(state.budget)
    if fit.params is None or not fit.usable:
        return Recommendation(rid, "insufficient_data", fit.message, numbers)
    p = fit.params
    if fit.status == "decreasing":
        return Recommendation(rid, "stop", f"pass rate is falling: {fit.message}", numbers)
    a_lo, a_hi = numbers["A_lo"], numbers["A_hi"]
    if a_lo is not None and a_hi is not None and a_hi - a_lo > pol.max_ceiling_width:
        reason = (
            f"ceiling not identified yet: A in [{a_lo:.2f}, {a_hi:.2f}] at {fit.level:.0%}; "
            "collect more points before deciding"
        )
        return Recommendation(rid, "unstable", reason, numbers)
    budget = state.budget
    if budget is not None and budget > state.compute_used:
        rest = gain_from_scaling(fit, state.compute_used, budget / max(state.compute_used, 1e-300))
        if rest is not None:
            numbers.update(remaining_gain=rest.gain, remaining_gain_hi=rest.hi, predicted_at_budget=rest.after)
            optimistic = rest.hi if rest.hi is not None else rest.gain
            if optimistic < pol.min_gain:
                reason = (
                    f"plateaued: the remaining budget buys {rest.gain:+.3f} (at most {optimistic:+.3f}) "
                    f"< {pol.min_gain}; predicted {rest.after:.3f} at budget vs ceiling {p.A:.3f}"
                )
                return Recommendation(rid, "stop", reason, numbers)
    horizon = max(budget or 0.0, state.compute_used)
    if horizon > 0:
        more = gain_from_scaling(fit, horizon, pol.scale_factor)
        if more is not None:
            numbers.update(scale_gain=more.gain, scale_gain_lo=more.lo, predicted_scaled=more.after)
            lo_ok = more.lo is None or more.lo > 0
            if more.gain >= pol.scale_gain and lo_ok:
                reason = (
                    f"{pol.scale_factor:g}x the compute ({horizon * pol.scale_factor:.4g}) is predicted to add "
                    f"{more.gain:+.3f} (to {more.after:.3f}); ceiling A={p.A:.3f}"
                )
                return Recommendation(rid, "scale", reason, numbers)
    if fit.status == "flat":
        return Recommendation(rid, "stop", f"no gain: {fit.message}", numbers)
    return Recommendation(rid, "continue", f"on track: ceiling A={p.A:.3f}, B={p.B:.3g}", numbers)


def recommend_set(states: Sequence[RunState], policy: Policy | None = None) -> list[Recommendation]:
    """Recommendations for competing runs (e.g. the cells of one ablation grid), in the order given.

    Each run first gets :func:`recommend_run`. Among runs whose ceiling is identified, the one with the highest
    A leads; a run whose A is more than ``ceiling_margin`` below the leader's, and whose interval for A lies
    entirely below the leader's A, is stopped. The leader is recommended for scaling unless its own
    recommendation is to stop. Runs tied with the leader (within the margin) keep their own recommendation, with
    the efficiency comparison (B, C_mid) added to the reason.
    """
    pol = policy or Policy()
    own = [recommend_run(s, pol) for s in states]
    ranked = [
        (s, r)
        for s, r in zip(states, own, strict=True)
        if r.action in ("continue", "scale", "stop") and s.fit.params is not None and s.fit.status == "ok"
    ]
    if len(ranked) < 2:
        return own
    leader_state, _ = max(ranked, key=lambda sr: sr[0].fit.params.A if sr[0].fit.params else -np.inf)
    assert leader_state.fit.params is not None
    a_best = leader_state.fit.params.A
    out: list[Recommendation] = []
    for s, r in zip(states, own, strict=True):
        p = s.fit.params
        numbers = {**r.numbers, "leader_A": a_best}
        if s is leader_state:
            if r.action != "stop":
                reason = f"highest ceiling of {len(ranked)} runs (A={a_best:.3f}); {r.reason}"
                out.append(Recommendation(s.run_id, "scale", reason, numbers))
            else:
                out.append(r)
            continue
        if p is None or r.action in ("insufficient_data", "unstable") or s.fit.status != "ok":
            out.append(r)
            continue
        gap = a_best - p.A
        a_hi = (s.fit.intervals or {}).get("A", (p.A, p.A))[1]
        numbers["ceiling_gap"] = gap
        if gap > pol.ceiling_margin and a_hi < a_best:
            reason = (
                f"ceiling clearly below the best run {leader_state.run_id}: A={p.A:.3f} (≤{a_hi:.3f}) vs "
                f"{a_best:.3f}, a gap of {gap:.3f} > ±{pol.ceiling_margin}"
            )
            out.append(Recommendation(s.run_id, "stop", reason, numbers))
        elif gap <= pol.ceiling_margin:
            lp = leader_state.fit.params
            faster = "faster" if (p.C_mid, -p.B) < (lp.C_mid, -lp.B) else "slower"
            reason = (
                f"same ceiling as {leader_state.run_id} within ±{pol.ceiling_margin} (A={p.A:.3f}); "
                f"reaches half its gain {faster} (C_mid={p.C_mid:.4g} vs {lp.C_mid:.4g}); {r.reason}"
            )
            out.append(Recommendation(s.run_id, r.action, reason, numbers))
        else:
            out.append(
                Recommendation(
                    s.run_id, r.action, f"{r.reason}; ceiling {gap:.3f} below the best, not yet significant", numbers
                )
            )
    return out
