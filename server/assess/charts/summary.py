"""The experiments list: status counts, compute, the best identified ceiling and the advice counts.

The best ceiling is not named while a run ahead of it on value at the budget (the verdict's ranking) has a ceiling
not identified yet: the list says so (``ceiling_note``) instead of pointing below the leaders.

Reads each experiment's stored assessment (the numbers its own page shows; no fitting), so the list stays fast with
many experiments and never disagrees with the experiment's page.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.assess.charts.schemas import BestRun, ExperimentSummary
from server.assess.schemas import AssessmentOut
from server.lifecycle.runs import as_utc
from server.lifecycle.status import FINISHED
from server.store.alert_models import Alert
from server.store.models import Experiment, Run, StoredAssessment


def _assessments(session: Session, experiment_ids: list[int]) -> dict[int, AssessmentOut]:
    """The stored assessment of each experiment that has one (what its own page shows)."""
    if not experiment_ids:
        return {}
    rows = session.scalars(select(StoredAssessment).where(StoredAssessment.experiment_id.in_(experiment_ids)))
    return {row.experiment_id: AssessmentOut.model_validate(row.body) for row in rows}


def _best(assessment: AssessmentOut | None) -> tuple[BestRun | None, str | None]:
    """The highest identified ceiling of the assessment (the runs table's rank 1 by ceiling), and ``None`` with the
    reason when a run that leads it on value at the budget (the verdict's order: ``rank_at_budget``) has a ceiling
    not identified yet: that run may well end with the higher ceiling, so naming the best identified one would point
    below the leaders (the list named a 4th run while the leaders were still rising)."""
    if assessment is None:
        return None, None
    ranked = [e for e in assessment.runs if e.rank_ceiling == 1 and e.A is not None]
    if not ranked:
        return None, None
    e = ranked[0]
    mine = e.rank_at_budget
    ahead = sorted(
        (r for r in assessment.runs if r.rank_at_budget is not None and (mine is None or r.rank_at_budget < mine)),
        key=lambda r: r.rank_at_budget or 0,
    )
    rising = [r.name for r in ahead if not r.ceiling_identified]
    if rising:
        shown = ", ".join(rising[:3]) + (f" and {len(rising) - 3} more" if len(rising) > 3 else "")
        return None, (
            f"not named: {shown}, ahead on value at the budget, {'has' if len(rising) == 1 else 'have'} a ceiling "
            f"not identified yet (still rising); the highest identified ceiling is {e.name}'s ({e.A:.3f})"
        )
    return BestRun(run_id=e.id, run_name=e.name, A=float(e.A or 0.0), A_lo=e.A_lo, A_hi=e.A_hi), None


def _advice_counts(assessment: AssessmentOut | None, runs: list[Run]) -> dict[str, int]:
    """The assessment's advice over the runs still queued or running now (a finished run gets none)."""
    if assessment is None:
        return {}
    live = {r.id for r in runs if r.status not in FINISHED}
    return dict(Counter(e.action for e in assessment.runs if e.id in live))


def _alert_counts(session: Session, experiment_ids: list[int]) -> dict[int, dict[str, int]]:
    """Stored alerts per experiment, by severity."""
    if not experiment_ids:
        return {}
    out: dict[int, dict[str, int]] = defaultdict(dict)
    rows = session.execute(
        select(Alert.experiment_id, Alert.severity, func.count())
        .where(Alert.experiment_id.in_(experiment_ids))
        .group_by(Alert.experiment_id, Alert.severity)
    )
    for experiment_id, severity, count in rows:
        out[int(experiment_id or 0)][str(severity)] = int(count)
    return out


def list_summaries(session: Session, limit: int, offset: int) -> list[ExperimentSummary]:
    exps = session.scalars(select(Experiment).order_by(Experiment.id.desc()).limit(limit).offset(offset)).all()
    ids = [e.id for e in exps]
    runs_of: dict[int, list[Run]] = defaultdict(list)
    if ids:
        for run in session.scalars(select(Run).where(Run.experiment_id.in_(ids)).order_by(Run.id)):
            runs_of[run.experiment_id].append(run)
    assessed = _assessments(session, ids)
    alerts = _alert_counts(session, ids)
    out = []
    for exp in exps:
        runs = runs_of[exp.id]
        doc = exp.document
        best, ceiling_note = _best(assessed.get(exp.id))
        out.append(
            ExperimentSummary(
                id=exp.id,
                name=exp.name,
                description=str(doc.get("description", "")),
                created_at=as_utc(exp.created_at),
                policy=exp.policy_mode,
                task=doc.get("task"),
                model=doc.get("model"),
                compute_unit=str(doc.get("compute_unit", "compute")),
                n_runs=len(runs),
                status_counts=dict(Counter(r.status for r in runs)),
                compute_used=sum(r.compute_used for r in runs),
                total_budget=sum(r.budget or 0.0 for r in runs),
                best=best,
                ceiling_note=ceiling_note,
                recommendations=_advice_counts(assessed.get(exp.id), runs),
                alerts=alerts.get(exp.id, {}),
            )
        )
    return out
