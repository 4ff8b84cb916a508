"""The CI gate: the run the decisions rank first and whether that is decided.

It is computed inside the experiment's assessment (:mod:`server.assessing`), from the decision the dashboard shows
and the replay measures (``rl_core.scaling.decide_grid``): the best run is the decision's leader, the run with the
highest forecast value at the budget among fits whose ceiling is off the A = 1 bound; the runner-up is the next one
of another recipe (the best run's own seeds are ranked after it but never its runner-up, unless the policy sets
``rank_replicates``).

Invariants:

- *decided* needs every run that could still win to have been assessed: while a queued, running or resumable run
  has no usable forecast at its budget, the verdict is undecided and ``waiting_for`` names it. A grid whose runs
  have barely started can never pass the gate.
- runs reporting compute in different units are never compared.
- then it is decided when the posterior probability that the best run ends higher at the budget than the runner-up
  reaches ``min_confidence``, or when every other run has been stopped or is dominated.

:func:`at_confidence` re-reads a stored verdict at another ``min_confidence`` without any fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rl_core.scaling import CurveFit, Recommendation
from rl_core.scaling.decide.grid_decisions import probability_higher
from server.models import Experiment, Run
from server.recommending import policy_of, recipe_key
from server.schemas import RankedRun, VerdictOut
from server.status import ACTIVE

DEFAULT_CONFIDENCE = 0.9


def _ranked(run: Run, rec: Recommendation, fit_status: str) -> RankedRun:
    n = rec.numbers
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
        action=rec.action,
        rule=rec.rule,
        fit_status=fit_status,
    )


def could_still_win(run: Run, resumable: bool) -> bool:
    """Queued and running runs, and stopped runs the policy may bring back: the gate must wait for their forecast."""
    return run.status in ACTIVE or run.status == "stopping" or resumable


def verdict(
    experiment: Experiment,
    decided_runs: Sequence[tuple[Run, Recommendation]],
    fits: Mapping[int, CurveFit],
    resumable: frozenset[int] = frozenset(),
    units: Mapping[int, str] | None = None,
    min_confidence: float = DEFAULT_CONFIDENCE,
) -> VerdictOut:
    """The verdict of one assessment (``resumable``: ids of stopped runs ``auto_stop`` may resume; ``units``: each
    run's compute unit)."""
    finished = all(run.status not in ACTIVE | {"stopping"} for run, _ in decided_runs)
    comparable = [(run, rec) for run, rec in decided_runs if rec.numbers.get("V_budget") is not None]
    leader = [(run, rec) for run, rec in comparable if rec.rule == "leader"]
    rest = sorted(
        (rr for rr in comparable if rr not in leader), key=lambda rr: float(rr[1].numbers["V_budget"] or 0.0)
    )[::-1]
    ordered = leader + rest
    # The comparison is with other recipes: the best run's own seeds stay in the ranking but are never its runner-up.
    best_key = recipe_key(ordered[0][0]) if ordered and not policy_of(experiment).rank_replicates else None
    rivals = [rr for k, rr in enumerate(ordered) if k == 0 or best_key is None or recipe_key(rr[0]) != best_key]
    ranking = [_ranked(run, rec, fits[run.id].status) for run, rec in ordered]
    ranking += [_ranked(run, rec, fits[run.id].status) for run, rec in decided_runs if (run, rec) not in ordered]
    waiting = [
        run.name
        for run, rec in decided_runs
        if rec.numbers.get("V_budget") is None and could_still_win(run, run.id in resumable)
    ]
    unit_groups = sorted(set((units or {}).values()))
    if len(unit_groups) > 1:
        by_unit = {u: [run.name for run, _ in decided_runs if (units or {}).get(run.id) == u] for u in unit_groups}
        reason = "runs report compute in different units, which are never compared: " + "; ".join(
            f"{u}: {_names(n, 3)}" for u, n in by_unit.items()
        )
        return undecided(experiment.id, reason, finished)

    def out(reason: str, decided: bool = False, confidence: float | None = None, dominated: bool = False) -> VerdictOut:
        best = rivals[0] if rivals else None
        second = rivals[1] if len(rivals) > 1 else None
        diff = None
        if best is not None and second is not None:
            diff = float(best[1].numbers["V_budget"] or 0.0) - float(second[1].numbers["V_budget"] or 0.0)
        named = {
            "best_run_id": None if best is None else best[0].id,
            "best_run_name": None if best is None else best[0].name,
            "runner_up_id": None if second is None else second[0].id,
            "runner_up_name": None if second is None else second[0].name,
            "basis": "forecast" if best is not None and second is not None else "none",
        }
        return undecided(experiment.id, reason, finished, waiting).model_copy(
            update={
                **named,
                "decided": decided,
                "difference_at_budget": diff,
                "confidence": confidence,
                "ranking": ranking,
                "others_dominated": dominated,
            }
        )

    if not ordered:
        if waiting:
            return out(f"no run has a usable forecast yet; waiting for {_names(waiting)}")
        return out("no run has a usable fit yet")
    if len(rivals) == 1:
        tail = f"; waiting for {_names(waiting)}" if waiting else ""
        if len(ordered) > 1:
            return out(f"only one recipe has a usable fit (its seeds are not compared with each other){tail}")
        return out(f"only one run has a usable fit; nothing to compare it with yet{tail}")
    (best, best_rec), (second, second_rec) = rivals[0], rivals[1]
    if not leader:
        return out(f"no run is a comparable leader yet (ceilings not identified); {best.name} forecasts highest")
    prob = probability_higher(
        fits[best.id],
        best.budget,
        fits[second.id],
        second.budget,
        best_rec,
        second_rec,
        comparison=policy_of(experiment).forecast_comparison,
    )
    dominated = all(rec.rule == "dominated" or run.status == "stopped" for run, rec in rivals[1:])
    v_best, v_second = best_rec.numbers["V_budget"], second_rec.numbers["V_budget"]
    head = (
        f"{best.name} forecasts {v_best:.3f} at the budget vs {second.name}'s {v_second:.3f}; "
        f"P(higher at the budget) = {prob:.2f}"
    )
    if all(recipe_key(run) is None for run, _ in rivals[:2]):
        head += " (from the fits' uncertainty alone: single runs carry no seed-to-seed spread)"
    return at_confidence(out(head, False, prob, dominated), min_confidence)


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
    if v.confidence is None:
        return v
    head = v.reason.split(" [", 1)[0]
    if v.waiting_for and not decide_early:
        why = f"waiting for {_names(v.waiting_for)}, which could still win and have no usable forecast yet"
        return v.model_copy(update={"decided": False, "reason": f"{head} [not decided: {why}]"})
    if v.confidence >= min_confidence or v.others_dominated:
        why = "every other run is dominated" if v.confidence < min_confidence else f"≥ {min_confidence:g}"
        if v.waiting_for:
            why += f"; decided early, ignoring {_names(v.waiting_for)}, which have no forecast yet"
        return v.model_copy(update={"decided": True, "reason": f"{head} [{why}]"})
    return v.model_copy(update={"decided": False, "reason": f"{head} [< {min_confidence:g}: not decided yet]"})
