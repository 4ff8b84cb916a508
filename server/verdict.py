"""The CI gate: the run the decisions rank first and whether that is decided.

It reads the same decision the dashboard shows and the replay measures (:func:`server.recommending.decide`, i.e.
``rl_core.scaling.decide_grid``): the best run is the decision's leader, the run with the highest forecast value at
the budget among fits whose ceiling is off the A = 1 bound; the runner-up is the next one of another recipe (the
best run's own seeds are ranked after it but never its runner-up, unless the policy sets ``rank_replicates``: the
gap between seeds of one recipe is noise, and the decisions do not rank it either). The verdict is
*decided* when the posterior probability that the best run ends higher at the budget than the runner-up reaches
``min_confidence`` (a low-confidence verdict is undecided), or when every other run has been stopped as dominated.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from rl_core.scaling import Recommendation
from rl_core.scaling.grid_decisions import probability_higher
from server.models import Experiment, Run
from server.recommending import FitCache, decide, experiment_fits, policy_of, recipe_key
from server.schemas import RankedRun, VerdictOut
from server.status import ACTIVE


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


def verdict(session: Session, experiment: Experiment, cache: FitCache, min_confidence: float) -> VerdictOut:
    fits = {rf.run.id: rf.fit for rf in experiment_fits(session, experiment, cache)}
    decided_runs = decide(session, experiment, cache, fits)
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

    def out(reason: str, decided: bool = False, confidence: float | None = None) -> VerdictOut:
        best = rivals[0] if rivals else None
        second = rivals[1] if len(rivals) > 1 else None
        diff = None
        if best is not None and second is not None:
            diff = float(best[1].numbers["V_budget"] or 0.0) - float(second[1].numbers["V_budget"] or 0.0)
        return VerdictOut(
            experiment_id=experiment.id,
            decided=decided,
            best_run_id=None if best is None else best[0].id,
            best_run_name=None if best is None else best[0].name,
            runner_up_id=None if second is None else second[0].id,
            runner_up_name=None if second is None else second[0].name,
            basis="forecast" if best is not None and second is not None else "none",
            difference_at_budget=diff,
            confidence=confidence,
            reason=reason,
            finished=finished,
            ranking=ranking,
        )

    if not ordered:
        return out("no run has a usable fit yet")
    if len(rivals) == 1:
        if len(ordered) > 1:
            return out("only one recipe has a usable fit (its seeds are not compared with each other)")
        return out("only one run has a usable fit; nothing to compare it with yet")
    (best, best_rec), (second, second_rec) = rivals[0], rivals[1]
    if not leader:
        return out(f"no run is a comparable leader yet (ceilings not identified); {best.name} forecasts highest")
    prob = probability_higher(fits[best.id], best.budget, fits[second.id], second.budget, best_rec, second_rec)
    others_dominated = all(rec.rule == "dominated" or run.status == "stopped" for run, rec in rivals[1:])
    v_best, v_second = best_rec.numbers["V_budget"], second_rec.numbers["V_budget"]
    head = (
        f"{best.name} forecasts {v_best:.3f} at the budget vs {second.name}'s {v_second:.3f}; "
        f"P(higher at the budget) = {prob:.2f}"
    )
    if prob >= min_confidence or others_dominated:
        why = "every other run is dominated" if prob < min_confidence else f"≥ {min_confidence:g}"
        return out(f"{head} ({why})", True, prob)
    return out(f"{head} < {min_confidence:g}: not decided yet", False, prob)
