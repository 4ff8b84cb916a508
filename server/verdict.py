"""The CI gate: rank an experiment's runs by fitted ceiling and decide whether the best one is known yet.

Decision rule (the paper's): the best run is the one with the highest A. Against the runner-up,
``rl_core.scaling.compare_ceilings`` decides: ceilings more than the margin apart decide by A (and the verdict is
*decided* only when the posterior probability that the best ceiling is higher reaches ``min_confidence``);
ceilings within the margin decide by B refitted at the common A (efficiency); otherwise it is undecided.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy.orm import Session

from rl_core.scaling import FitOptions, compare_ceilings
from server.forecasting import fit_spec_of, load_curve
from server.models import Experiment
from server.recommending import FitCache, RunFit, experiment_fits, policy_of
from server.schemas import RankedRun, VerdictOut
from server.status import ACTIVE

Basis = Literal["ceiling", "efficiency", "none"]


def _ranked(rf: RunFit) -> RankedRun:
    p = rf.fit.params
    lo, hi = (rf.fit.intervals or {}).get("A", (None, None))
    return RankedRun(
        run_id=rf.run.id,
        run_name=rf.run.name,
        A=None if p is None else p.A,
        A_lo=lo,
        A_hi=hi,
        B=None if p is None else p.B,
        C_mid=None if p is None else p.C_mid,
        fit_status=rf.fit.status,
    )


def _ceiling(rf: RunFit) -> float:
    return rf.fit.params.A if rf.fit.params is not None else float("-inf")


def verdict(session: Session, experiment: Experiment, cache: FitCache, min_confidence: float) -> VerdictOut:
    fits = experiment_fits(session, experiment, cache)
    finished = all(rf.run.status not in ACTIVE | {"stopping"} for rf in fits)
    usable = sorted(
        (rf for rf in fits if rf.fit.params is not None and rf.fit.status == "ok"), key=_ceiling, reverse=True
    )
    ranking = [_ranked(rf) for rf in usable] + [_ranked(rf) for rf in fits if rf not in usable]

    def out(
        best: RunFit | None,
        second: RunFit | None,
        decided: bool,
        basis: Basis,
        reason: str,
        confidence: float | None = None,
    ) -> VerdictOut:
        diff = None if best is None or second is None else _ceiling(best) - _ceiling(second)
        return VerdictOut(
            experiment_id=experiment.id,
            decided=decided,
            best_run_id=None if best is None else best.run.id,
            best_run_name=None if best is None else best.run.name,
            runner_up_id=None if second is None else second.run.id,
            runner_up_name=None if second is None else second.run.name,
            basis=basis,
            difference_A=diff,
            confidence=confidence,
            reason=reason,
            finished=finished,
            ranking=ranking,
        )

    if not usable:
        return out(None, None, False, "none", "no run has a usable fit yet")
    if len(usable) == 1:
        return out(usable[0], None, False, "none", "only one run has a usable fit; nothing to compare it with yet")
    best, second = usable[0], usable[1]
    spec = fit_spec_of(experiment)
    ci, cj = load_curve(session, best.run.id), load_curve(session, second.run.id)
    cmp = compare_ceilings(
        ci.compute,
        ci.pass_rate,
        cj.compute,
        cj.pass_rate,
        policy_of(experiment).ceiling_margin,
        FitOptions(burn_in=spec.burn_in, level=spec.level),
    )
    prob = cmp.probability_i_higher
    if cmp.verdict == "i_higher_ceiling":
        sure = prob is None or prob >= min_confidence
        note = "" if sure else f"; P(best ceiling is higher) = {prob:.2f} < {min_confidence}, not decided yet"
        return out(best, second, sure, "ceiling", cmp.reason + note, prob)
    if cmp.verdict == "i_more_efficient":
        return out(best, second, True, "efficiency", cmp.reason, prob)
    if cmp.verdict == "j_more_efficient":
        return out(second, best, True, "efficiency", cmp.reason, None if prob is None else 1.0 - prob)
    # "undecided", or "j_higher_ceiling" (only if the pairwise refit disagrees with the ranking): not decided.
    return out(best, second, False, "none", cmp.reason, prob)
