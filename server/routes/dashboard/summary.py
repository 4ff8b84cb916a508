"""The experiments list: status counts, compute, the best fitted ceiling and the latest recommendations.

Reads stored snapshots only (no fitting), so the list stays fast with many experiments.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.alerts.models import Alert
from server.models import Experiment, FitSnapshot, RecommendationSnapshot, Run
from server.routes.dashboard.schemas import BestRun, ExperimentSummary
from server.runs import as_utc


def _latest_full(session: Session, run_ids: list[int]) -> dict[int, FitSnapshot]:
    if not run_ids:
        return {}
    newest = (
        select(func.max(FitSnapshot.id))
        .where(FitSnapshot.run_id.in_(run_ids), FitSnapshot.kind == "full")
        .group_by(FitSnapshot.run_id)
    )
    return {s.run_id: s for s in session.scalars(select(FitSnapshot).where(FitSnapshot.id.in_(newest)))}


def _best(runs: list[Run], snaps: dict[int, FitSnapshot]) -> BestRun | None:
    ok = [r for r in runs if r.id in snaps and snaps[r.id].status == "ok" and snaps[r.id].A is not None]
    scored = [(snaps[r.id], r) for r in ok]
    if not scored:
        return None
    snap, run = max(scored, key=lambda t: t[0].A or 0.0)
    ci: dict[str, Any] = snap.body.get("ci") or {}
    lo, hi = (ci.get("A") or [None, None])[:2]
    return BestRun(run_id=run.id, run_name=run.name, A=float(snap.A or 0.0), A_lo=lo, A_hi=hi)


def _recommendation_counts(session: Session, experiment_ids: list[int]) -> dict[int, dict[str, int]]:
    if not experiment_ids:
        return {}
    newest = (
        select(func.max(RecommendationSnapshot.id))
        .where(RecommendationSnapshot.experiment_id.in_(experiment_ids))
        .group_by(RecommendationSnapshot.experiment_id)
    )
    out: dict[int, dict[str, int]] = {}
    for snap in session.scalars(select(RecommendationSnapshot).where(RecommendationSnapshot.id.in_(newest))):
        out[snap.experiment_id] = dict(Counter(str(r.get("action")) for r in snap.body))
    return out


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
    snaps = _latest_full(session, [r.id for rs in runs_of.values() for r in rs])
    recs = _recommendation_counts(session, ids)
    alerts = _alert_counts(session, ids)
    out = []
    for exp in exps:
        runs = runs_of[exp.id]
        doc = exp.document
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
                best=_best(runs, snaps),
                recommendations=recs.get(exp.id, {}),
                alerts=alerts.get(exp.id, {}),
            )
        )
    return out
