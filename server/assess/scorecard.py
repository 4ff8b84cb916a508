"""The scorecard: what the decisions did on the user's own grid, graded from what the service stored.

It reads the experiment's stored assessment (as :func:`server.assess.assessing.latest` answers it), the decision
moments recorded as each assessment was stored (:mod:`server.assess.moments`) and the alerts raised; it never fits
or decides.

Invariants:

- ``saved`` is the sum over stopped runs (``stopping``/``stopped``) of ``budget - compute_used`` (never negative);
  runs that succeeded, failed or are still live save nothing. ``budget`` is the sum of the runs' budgets, so
  ``compute_used + saved <= budget`` once every run has finished.
- ``first_decided`` is the first recorded verdict moment that was decided; its ``share_of_budget`` is the compute
  every run had used then over the grid's total budget. ``changes`` are the verdict moments after it, each a
  different (decided, best run) from the one before.
- a stopped run is graded by the forecast stored when it was stopped against its last evaluation then; a
  succeeded run by its forecasts stored at 30% and 50% of its budget against its observed value at the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.assess.moments import MILESTONES, STOPPED, Moment, grid_budget, read_moments, spent
from server.assess.schemas import (
    AssessmentOut,
    EarlyForecast,
    RunAssessment,
    RunGrade,
    ScorecardOut,
    StopForecast,
    VerdictMoment,
)
from server.store.alert_models import Alert


def _verdict_moment(m: Moment) -> VerdictMoment:
    b = m.body
    return VerdictMoment(
        assessment_version=m.version,
        decided=bool(b["decided"]),
        best_run_id=b.get("best_run_id"),
        best_run_name=b.get("best_run_name"),
        spent=float(b["spent"]),
        share_of_budget=b.get("share"),
    )


def verdict_history(moments: Sequence[Moment]) -> tuple[VerdictMoment | None, list[VerdictMoment]]:
    """The first decided verdict and every change after it (a repeat of the same verdict is not a change)."""
    verdicts = [_verdict_moment(m) for m in moments if m.kind == "verdict"]
    first = next((i for i, v in enumerate(verdicts) if v.decided), None)
    if first is None:
        return None, []
    changes: list[VerdictMoment] = []
    last = verdicts[first]
    for v in verdicts[first + 1 :]:
        if (v.decided, v.best_run_id) != (last.decided, last.best_run_id):
            changes.append(v)
            last = v
    return verdicts[first], changes


def _against(body: Mapping[str, Any], milestone: float, final: float | None) -> EarlyForecast:
    value, lo, hi = (body.get(k) for k in ("value", "lo", "hi"))
    v = None if value is None else float(value)
    low = None if lo is None else float(lo)
    high = None if hi is None else float(hi)
    share = body.get("share")
    return EarlyForecast(
        milestone=milestone,
        share=None if share is None else float(share),
        value=v,
        lo=low,
        hi=high,
        error=None if v is None or final is None else v - final,
        inside=None if low is None or high is None or final is None else low <= final <= high,
    )


def grade_run(e: RunAssessment, moments: Sequence[Moment]) -> RunGrade:
    """One run's grade from its entry in the latest assessment and its recorded moments (oldest first)."""
    mine = [m for m in moments if m.run_id == e.id]
    stopped = e.status in STOPPED
    saved = max(0.0, e.budget - e.compute_used) if stopped and e.budget is not None else 0.0
    grade = RunGrade(
        run_id=e.id, run_name=e.name, status=e.status, budget=e.budget, compute_used=e.compute_used, saved=saved
    )
    if stopped:
        stop = next((m for m in reversed(mine) if m.kind == "stop"), None)
        if stop is not None:
            b = stop.body
            grade.stop_forecast = StopForecast(
                share=b.get("share"), value=b.get("value"), lo=b.get("lo"), hi=b.get("hi")
            )
            grade.last_value = b.get("last_value")
    elif e.status == "succeeded":
        final = e.V_budget if e.numbers.get("observed") else None
        grade.final_value = final
        for milestone in MILESTONES:
            m = next((m for m in mine if m.kind == "forecast" and m.body.get("milestone") == milestone), None)
            if m is not None:
                grade.early.append(_against(m.body, milestone, final))
    return grade


def amount(v: float) -> str:
    """A compute amount for people: ``12,000``, ``37.5``, ``0.125``."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def summary_line(card: ScorecardOut) -> str:
    """``stops saved X of Y unit (Z%); decided at N% of the budget, unchanged since`` (or what happened instead)."""
    share = "" if card.saved_share is None else f" ({card.saved_share:.0%})"
    head = f"stops saved {amount(card.saved)} of {amount(card.budget)} {card.compute_unit}{share}"
    first = card.first_decided
    if first is None:
        return f"{head}; never decided"
    at = "?" if first.share_of_budget is None else f"{first.share_of_budget:.0%}"
    decided = f"decided at {at} of the budget ({first.best_run_name})"
    if not card.changes:
        return f"{head}; {decided}, unchanged since"
    last = card.changes[-1]
    now = f"now {last.best_run_name}" if last.decided else "now undecided"
    n = len(card.changes)
    return f"{head}; {decided}, changed {n} time{'s' if n != 1 else ''} since ({now})"


def build_scorecard(assessment: AssessmentOut, moments: Sequence[Moment], alerts: Mapping[str, int]) -> ScorecardOut:
    """The scorecard of ``assessment`` (the latest stored) with the experiment's ``moments`` (oldest first). Pure."""
    runs = [grade_run(e, moments) for e in assessment.runs]
    total = grid_budget(assessment)
    saved = sum(r.saved for r in runs)
    first, changes = verdict_history(moments)
    v = assessment.verdict
    card = ScorecardOut(
        experiment_id=assessment.experiment_id,
        assessment_version=assessment.version,
        finished=v.finished,
        compute_unit=assessment.compute_unit,
        budget=total,
        compute_used=spent(assessment),
        saved=saved,
        saved_share=saved / total if total > 0 else None,
        first_decided=first,
        changes=changes,
        decided=v.decided,
        best_run_id=v.best_run_id,
        best_run_name=v.best_run_name,
        runs=runs,
        alerts=dict(alerts),
        summary="",
    )
    card.summary = summary_line(card)
    return card


def alert_counts(session: Session, experiment_id: int) -> dict[str, int]:
    """Alerts raised for the experiment, by type."""
    rows = session.execute(
        select(Alert.type, func.count()).where(Alert.experiment_id == experiment_id).group_by(Alert.type)
    ).all()
    return {str(t): int(n) for t, n in sorted(rows)}


def read_scorecard(session: Session, assessment: AssessmentOut) -> ScorecardOut:
    """The scorecard of the experiment's stored ``assessment`` (as :func:`server.assess.assessing.latest` reads it)
    with its recorded moments and alerts."""
    eid = assessment.experiment_id
    return build_scorecard(assessment, read_moments(session, eid), alert_counts(session, eid))
