"""Wrappers that keep a decision's stop (or resume) back, applied in order to each run's recommendation after the
grid comparison: :class:`TooEarly` (no stop before ``min_fraction`` of the budget) and :class:`Hold` (a stop or a
resume must also be what the decision says without the newest evaluation). As Optuna's ``PatientPruner`` wraps a
pruner, each gate sees a recommendation and returns it, or a ``continue`` saying what it is waiting for.

Invariants: a gate never turns a recommendation into a stop or a resume (it only holds one back); a run that is
not live is never held back from a stop (nothing acts on it); the observed-value rules users configure
(:mod:`.rules`) are not gates: they stop a run at once (their own noise protection is part of each rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rl_core.scaling.decide.compute_target import hold_back
from rl_core.scaling.decide.grid_run import GridRun
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation


class Gate(Protocol):
    """Holds a run's recommendation back, or returns it as it is."""

    def apply(self, k: int, run: GridRun, rec: Recommendation) -> Recommendation: ...


@dataclass(frozen=True)
class TooEarly:
    """No stop of a live run before it has used ``policy.min_fraction`` of its budget (above a ``compute_target`` of
    0.5, the later fraction the knob holds stops back to, :func:`.compute_target.hold_back`); the compute target's own
    stops come from ``target_start`` on (a schedule that starts at ASHA's first rung must be able to act there)."""

    policy: Policy

    def apply(self, k: int, run: GridRun, rec: Recommendation) -> Recommendation:
        if rec.action != "stop" or run.status != "live" or not self._early(run):
            return rec
        if rec.rule == "compute_target" and self.policy.target_start is not None:
            return rec
        used, least = float(run.x[-1]) / float(run.budget or 1), hold_back(self.policy)
        reason = f"would stop, but only {used:.0%} of the budget is used (< {least:.0%}): {rec.reason}"
        return Recommendation(run.run_id, "continue", reason, rec.numbers, "too_early")

    def _early(self, run: GridRun) -> bool:
        budget = run.budget
        return budget is not None and run.x.size > 0 and float(run.x[-1]) < hold_back(self.policy) * budget


@dataclass(frozen=True)
class Hold:
    """A stop of a live run, or a resume, holds only if the decision made without every run's newest evaluation
    (``before``, in the same order; ``None`` when nothing needed confirming) says the same."""

    before: Sequence[Recommendation] | None

    def apply(self, k: int, run: GridRun, rec: Recommendation) -> Recommendation:
        if self.before is None:
            return rec
        if rec.action == "resume" and self.before[k].action != "resume":
            reason = f"resume pending confirmation: {rec.reason}"
            return Recommendation(run.run_id, "continue", reason, rec.numbers, "resume_pending")
        if rec.action == "stop" and run.status == "live" and self.before[k].action != "stop":
            reason = f"stop pending confirmation: {rec.reason}"
            return Recommendation(run.run_id, "continue", reason, rec.numbers, "pending")
        return rec


def held_back(gates: Sequence[Gate], k: int, run: GridRun, rec: Recommendation) -> Recommendation:
    """``rec`` through each gate in turn."""
    for gate in gates:
        rec = gate.apply(k, run, rec)
    return rec
