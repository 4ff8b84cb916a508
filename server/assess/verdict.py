"""The CI gate: the run the decisions rank first and whether that is decided.

It is computed inside the experiment's assessment (:mod:`server.assess.assessing`) from the verdict of the decision the
dashboard shows and the replay measures (``rl_core.scaling.decide.grid_verdict``, one leader rule): the best run is
the run with the highest value at the budget (its forecast while it runs, what it observed once it reached its
budget or finished; a ceiling on the A = 1 bound does not keep a run from leading); the runner-up is the next one of
another recipe (the best run's own seeds are ranked after it but never its runner-up, unless the policy sets
``rank_replicates``). The ranking is that one order, so the difference is never negative.

Invariants:

- *decided* needs every run that could still win to have been assessed: while a queued, running or resumable run
  has no usable forecast at its budget, the verdict is undecided and ``waiting_for`` names it. A grid whose runs
  have barely started can never pass the gate.
- runs reporting compute in different units are never compared.
- then it is decided when the probability that the best run ends higher at the budget than the runner-up reaches
  ``min_confidence``, or when every other run has been stopped or is dominated. Once both have reached their budget
  that probability is the observation's (their final evaluations against the evaluation noise).
- no finished run is given advice (:func:`server.assess.advice.shown_advice`).

:func:`at_confidence` re-reads a stored verdict at another ``min_confidence`` without any fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rl_core.scaling import CurveFit, Recommendation
from rl_core.scaling.decide.grid_verdict import DEFAULT_CONFIDENCE, GridVerdict
from server.assess.advice import shown_advice
from server.assess.fit_schemas import RankedRun, VerdictOut
from server.assess.recommending import recipe_key
from server.lifecycle.status import ACTIVE
from server.store.models import Experiment, Run

__all__ = ["DEFAULT_CONFIDENCE", "at_confidence", "could_still_win", "undecided", "verdict"]


def _ranked(run: Run, rec: Recommendation, fit_status: str) -> RankedRun:
    n = rec.numbers
    action, _ = shown_advice(run.status, rec.action, rec.rule, rec.reason)
    return RankedRun(
        run_id=run.id,
        run_name=run.name,
        A=n.get("A"),
        A_lo=n.get("A_lo"),
        A_hi=n.get("A_hi"),
        B=n.get("B"),
        C_mid=n.get("C_mid"),
        V_budget=n.get("V_budget"),
        V_lo=n.get("V_lo"),
        V_hi=n.get("V_hi"),
        observed=bool(n.get("observed")),
        action=action,
        rule=rec.rule,
        fit_status=fit_status,
    )


def could_still_win(run: Run, resumable: bool) -> bool:
    """Queued and running runs, and stopped runs the policy may bring back: the gate must wait for their forecast."""
    return run.status in ACTIVE or run.status == "stopping" or resumable


def verdict(
    experiment: Experiment,
    decided_runs: Sequence[tuple[Run, Recommendation]],
    grid: GridVerdict,
    fits: Mapping[int, CurveFit],
    resumable: frozenset[int] = frozenset(),
    units: Mapping[int, str] | None = None,
    min_confidence: float = DEFAULT_CONFIDENCE,
) -> VerdictOut:
    """The verdict of one assessment: ``grid`` is the decision's verdict (indices into ``decided_runs``);
    ``resumable``: ids of stopped runs ``auto_stop`` may resume; ``units``: each run's compute unit."""
    finished = all(run.status not in ACTIVE | {"stopping"} for run, _ in decided_runs)
    ordered = [decided_runs[i] for i in grid.order]
    ranked_ids = {run.id for run, _ in ordered}
    ranking = [_ranked(run, rec, fits[run.id].status) for run, rec in ordered]
    ranking += [_ranked(run, rec, fits[run.id].status) for run, rec in decided_runs if run.id not in ranked_ids]
    waiting = [
        run.name for run, rec in decided_runs if run.id not in ranked_ids and could_still_win(run, run.id in resumable)
    ]
    unit_groups = sorted(set((units or {}).values()))
    if len(unit_groups) > 1:
        by_unit = {u: [run.name for run, _ in decided_runs if (units or {}).get(run.id) == u] for u in unit_groups}
        reason = "runs report compute in different units, which are never compared: " + "; ".join(
            f"{u}: {_names(n, 3)}" for u, n in by_unit.items()
        )
        return undecided(experiment.id, reason, finished)
    best = None if grid.best is None else decided_runs[grid.best][0]
    second = None if grid.runner_up is None else decided_runs[grid.runner_up][0]
    base = undecided(experiment.id, "", finished, waiting).model_copy(
        update={
            "best_run_id": None if best is None else best.id,
            "best_run_name": None if best is None else best.name,
            "runner_up_id": None if second is None else second.id,
            "runner_up_name": None if second is None else second.name,
            "basis": grid.basis if second is not None else "none",
            "difference_at_budget": grid.difference,
            "confidence": grid.confidence,
            "ranking": ranking,
            "others_dominated": grid.others_dominated,
        }
    )
    tail = f"; waiting for {_names(waiting)}" if waiting else ""
    if best is None:
        if waiting:
            return base.model_copy(
                update={"reason": f"no run has a usable forecast yet; waiting for {_names(waiting)}"}
            )
        return base.model_copy(update={"reason": "no run has a usable fit yet"})
    if second is None or grid.best is None or grid.runner_up is None:
        if grid.others_dominated:
            head = f"{best.name} is the one recipe left: every run of another recipe was stopped"
            return at_confidence(base.model_copy(update={"reason": head}), min_confidence)
        if len(ordered) > 1:
            why = f"only one recipe has a usable fit (its seeds are not compared with each other){tail}"
        else:
            why = f"only one run has a usable fit; nothing to compare it with yet{tail}"
        return base.model_copy(update={"reason": why})
    v_best = decided_runs[grid.best][1].numbers["V_budget"]
    v_second = decided_runs[grid.runner_up][1].numbers["V_budget"]
    if grid.basis == "observed":
        head = (
            f"{best.name} ended at {v_best:.3f} at the budget vs {second.name}'s {v_second:.3f} (observed); "
            f"P(higher) = {grid.confidence:.2f} against the evaluation noise"
        )
    else:
        head = (
            f"{best.name} forecasts {v_best:.3f} at the budget vs {second.name}'s {v_second:.3f}; "
            f"P(higher at the budget) = {grid.confidence:.2f}"
        )
    if recipe_key(best) is None and recipe_key(second) is None:
        head += " (from the fits' uncertainty alone: single runs carry no seed-to-seed spread)"
    return at_confidence(base.model_copy(update={"reason": head}), min_confidence)


def undecided(experiment_id: int, reason: str, finished: bool, waiting_for: Sequence[str] = ()) -> VerdictOut:
    """A verdict with nothing ranked: no run can be compared yet, for ``reason``."""
    return VerdictOut(
        experiment_id=experiment_id,
        decided=False,
        best_run_id=None,
        best_run_name=None,
        runner_up_id=None,
        runner_up_name=None,
        basis="none",
        difference_at_budget=None,
        confidence=None,
        reason=reason,
        finished=finished,
        ranking=[],
        waiting_for=list(waiting_for),
    )


def _names(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def at_confidence(v: VerdictOut, min_confidence: float, decide_early: bool = False) -> VerdictOut:
    """The stored verdict read at ``min_confidence``: decided only when nothing it waits for is left (unless
    ``decide_early``) and the probability (or dominance) clears the bar. Pure: no fit, no database."""
    if v.confidence is None and not (v.others_dominated and v.best_run_id is not None):
        return v
    head = v.reason.split(" [", 1)[0]
    if v.waiting_for and not decide_early:
        why = f"waiting for {_names(v.waiting_for)}, which could still win and have no usable forecast yet"
        return v.model_copy(update={"decided": False, "reason": f"{head} [not decided: {why}]"})
    if (v.confidence is not None and v.confidence >= min_confidence) or v.others_dominated:
        sure = v.confidence is not None and v.confidence >= min_confidence
        why = f"≥ {min_confidence:g}" if sure else "every other recipe is dominated or stopped"
        if v.waiting_for:
            why += f"; decided early, ignoring {_names(v.waiting_for)}, which have no forecast yet"
        return v.model_copy(update={"decided": True, "reason": f"{head} [{why}]"})
    why = "every run has finished; not shown to differ" if v.finished else "not decided yet"
    return v.model_copy(update={"decided": False, "reason": f"{head} [< {min_confidence:g}: {why}]"})
