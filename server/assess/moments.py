"""The moments of an experiment's decisions, kept as the stored assessment is replaced: what the scorecard grades.

A stored assessment is replaced at each state of the experiment; the moments it would lose are appended to
``assessment_moments`` in the transaction that stores it (:func:`record_moments`, called by
:func:`server.assess.assessing.store_assessment`). Each is read from that assessment: nothing here fits or decides.

Invariants:

- rows are appended, never updated; :func:`new_moments` is pure and, given the moments recorded so far, adds only
  what changed, so storing the same assessment twice adds nothing.
- ``verdict``: the first decided verdict, then each change of (decided, best run) after it (another best run
  named, or undecided again). ``spent`` is the compute every run had used then (the sum of their ``compute_used``),
  ``budget`` the grid's total budget (the sum of the runs' budgets).
- ``forecast``: a run's first forecast at the budget stored at or past each :data:`MILESTONES` share of its budget
  (``share`` says where it really was), while its value was still a forecast (not observed).
- ``stop``: a run's forecast in the first assessment that saw it stopped (``stopping``/``stopped``, or told to
  stop under ``auto_stop``, which stops it in the same transaction), with ``last_value``, its last stored
  evaluation up to the compute it had used; ``resume``: a stopped run seen live again (a later stop is recorded
  anew).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.assess.schemas import AssessmentOut, RunAssessment
from server.base.jsonsafe import json_safe
from server.store.models import AssessmentMoment, StoredPoint

#: Shares of a run's budget at which its forecast is kept (the scorecard's early forecasts).
MILESTONES = (0.3, 0.5)
#: Statuses of a run that was stopped (``stopping`` becomes ``stopped`` once the trainer stops).
STOPPED = frozenset({"stopping", "stopped"})


@dataclass(frozen=True)
class Moment:
    """One row of ``assessment_moments`` (``version``: the stored assessment it was read from)."""

    kind: str
    run_id: int | None
    version: int
    body: dict[str, Any]


def spent(assessment: AssessmentOut) -> float:
    """Compute every run of the assessment had used."""
    return float(sum(e.compute_used for e in assessment.runs))


def grid_budget(assessment: AssessmentOut) -> float:
    """The grid's total budget: the sum of its runs' budgets (runs without one add nothing)."""
    return float(sum(e.budget for e in assessment.runs if e.budget is not None and e.budget > 0))


def _verdict_key(assessment: AssessmentOut) -> tuple[bool, int | None]:
    v = assessment.verdict
    return (True, v.best_run_id) if v.decided else (False, None)


def _forecast(e: RunAssessment) -> dict[str, Any]:
    share = e.compute_used / e.budget if e.budget else None
    return {
        "run_name": e.name,
        "status": e.status,
        "compute_used": e.compute_used,
        "budget": e.budget,
        "share": share,
        "value": e.V_budget,
        "lo": e.V_lo,
        "hi": e.V_hi,
        "observed": bool(e.numbers.get("observed")),
    }


def _stopped(e: RunAssessment, policy: str) -> bool:
    return e.status in STOPPED or (policy == "auto_stop" and e.status == "running" and e.action == "stop")


def new_moments(assessment: AssessmentOut, recorded: Sequence[Moment]) -> list[Moment]:
    """The moments ``assessment`` adds to those ``recorded`` for its experiment (oldest first)."""
    out: list[Moment] = []
    version = assessment.version
    verdicts = [m for m in recorded if m.kind == "verdict"]
    key = _verdict_key(assessment)
    last = None if not verdicts else (bool(verdicts[-1].body["decided"]), verdicts[-1].body.get("best_run_id"))
    if key != last and (verdicts or key[0]):
        v = assessment.verdict
        total = grid_budget(assessment)
        used = spent(assessment)
        body = {
            "decided": v.decided,
            "best_run_id": v.best_run_id if v.decided else None,
            "best_run_name": v.best_run_name if v.decided else None,
            "basis": v.basis,
            "confidence": v.confidence,
            "spent": used,
            "budget": total,
            "share": used / total if total > 0 else None,
        }
        out.append(Moment("verdict", None, version, body))
    have = {(m.run_id, m.body.get("milestone")) for m in recorded if m.kind == "forecast"}
    moves: dict[int, str] = {}
    for m in recorded:
        if m.kind in ("stop", "resume") and m.run_id is not None:
            moves[m.run_id] = m.kind
    for e in assessment.runs:
        f = _forecast(e)
        if e.budget and e.budget > 0 and e.V_budget is not None and not f["observed"]:
            for milestone in MILESTONES:
                if e.compute_used >= milestone * e.budget and (e.id, milestone) not in have:
                    out.append(Moment("forecast", e.id, version, {**f, "milestone": milestone}))
        stopped = _stopped(e, assessment.policy)
        if stopped and moves.get(e.id) != "stop":
            out.append(Moment("stop", e.id, version, {**f, "action": e.action, "rule": e.rule, "reason": e.reason}))
        elif not stopped and moves.get(e.id) == "stop":
            out.append(Moment("resume", e.id, version, f))
    return out


def read_moments(session: Session, experiment_id: int) -> list[Moment]:
    """The experiment's recorded moments, oldest first."""
    rows = session.execute(
        select(AssessmentMoment.kind, AssessmentMoment.run_id, AssessmentMoment.version, AssessmentMoment.body)
        .where(AssessmentMoment.experiment_id == experiment_id)
        .order_by(AssessmentMoment.id)
    ).all()
    return [Moment(r.kind, r.run_id, r.version, dict(r.body)) for r in rows]


def last_value(session: Session, run_id: int, compute_used: float) -> float | None:
    """The run's last stored evaluation (pass rate) at or before ``compute_used``: what it had shown."""
    return session.scalar(
        select(StoredPoint.pass_rate)
        .where(
            StoredPoint.run_id == run_id,
            StoredPoint.pass_rate.is_not(None),
            StoredPoint.compute <= compute_used,
        )
        .order_by(StoredPoint.step.desc())
        .limit(1)
    )


def record_moments(session: Session, assessment: AssessmentOut) -> list[Moment]:
    """Append the moments of ``assessment`` (stamped with its stored version) in ``session``'s transaction."""
    added = new_moments(assessment, read_moments(session, assessment.experiment_id))
    for m in added:
        body = dict(m.body)
        if m.kind == "stop" and m.run_id is not None:
            body["last_value"] = last_value(session, m.run_id, float(body["compute_used"]))
        session.add(
            AssessmentMoment(
                experiment_id=assessment.experiment_id,
                version=m.version,
                kind=m.kind,
                run_id=m.run_id,
                body=json_safe(body),
            )
        )
    return added
