"""ORM rows -> response models (the only place that shapes responses)."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.assess.assessing import ParsedAssessments, value_at_budget
from server.assess.fit_schemas import CurveFitBody, FitOut, FitSummary
from server.assess.point_fit import point_fit_stale
from server.lifecycle.recipes import effective_recipe
from server.lifecycle.runs import as_utc
from server.lifecycle.schemas import ExperimentOut, RunOut, TokenOut, TransitionOut
from server.lifecycle.spec import ExperimentSpec
from server.lifecycle.status import action_for
from server.lifecycle.tokens import token_scopes
from server.routes.schemas import RunDetail
from server.store.models import ApiToken, Experiment, FitSnapshot, Run, RunTransition


def run_out(run: Run, recipe: bool = True) -> RunOut:
    """A run as answered; lists leave its full recipe out (``recipe`` False: null) unless asked, so an answer's size
    follows its run count, not run count × recipe size (17 KB of grid answered 71.8 MB with every recipe)."""
    return RunOut(
        id=run.id,
        experiment_id=run.experiment_id,
        name=run.name,
        key=run.key,
        seed=run.seed,
        task=run.task,
        model=run.model,
        recipe=effective_recipe(run) if recipe else None,
        overrides=run.overrides or {},
        budget=run.budget,
        status=cast(Any, run.status),
        status_reason=run.status_reason,
        action=action_for(run.status),
        attempts=run.attempts,
        releases=run.releases,
        created_at=as_utc(run.created_at),
        updated_at=as_utc(run.updated_at),
        started_at=as_utc(run.started_at),
        finished_at=as_utc(run.finished_at),
        lease_owner=run.lease_owner,
        lease_expires_at=as_utc(run.lease_expires_at),
        n_points=run.n_points,
        compute_used=run.compute_used,
        last_step=run.last_step,
        latest_fit_id=run.latest_fit_id,
        last_seen_at=as_utc(run.last_seen_at),
        config=run.config or {},
        summary=run.summary or {},
        tags=run.tags or [],
        notes=run.notes or "",
    )


def fit_out(snap: FitSnapshot) -> FitOut:
    return FitOut(
        id=snap.id,
        run_id=snap.run_id,
        kind=cast(Any, snap.kind),
        created_at=as_utc(snap.created_at),
        n_points=snap.n_points,
        compute_max=snap.compute_max,
        fit=CurveFitBody.model_validate(snap.body),
    )


def fit_summary(snap: FitSnapshot) -> FitSummary:
    return FitSummary(
        id=snap.id,
        kind=cast(Any, snap.kind),
        status=snap.status,
        message=str(snap.body.get("message", "")),
        n_points=snap.n_points,
        compute_max=snap.compute_max,
        A=snap.A,
        B=snap.B,
        C_mid=snap.C_mid,
    )


def latest_full_fit(session: Session, run_id: int) -> FitSnapshot | None:
    return session.scalar(
        select(FitSnapshot)
        .where(FitSnapshot.run_id == run_id, FitSnapshot.kind == "full")
        .order_by(FitSnapshot.id.desc())
        .limit(1)
    )


def run_detail(session: Session, run: Run, parsed: ParsedAssessments) -> RunDetail:
    transitions = session.scalars(
        select(RunTransition).where(RunTransition.run_id == run.id).order_by(RunTransition.id)
    ).all()
    point = session.get(FitSnapshot, run.latest_fit_id) if run.latest_fit_id is not None else None
    full = latest_full_fit(session, run.id)
    return RunDetail(
        **run_out(run).model_dump(),
        transitions=[
            TransitionOut(
                from_status=cast(Any, t.from_status),
                to_status=cast(Any, t.to_status),
                reason=t.reason,
                actor=t.actor,
                attempt=t.attempt,
                at=as_utc(t.at),
            )
            for t in transitions
        ],
        fit=None if point is None else fit_out(point),
        forecast=None if full is None else fit_out(full),
        at_budget=value_at_budget(session, run, parsed),
        fit_pending=point_fit_stale(session, run),
    )


def experiment_out(session: Session, exp: Experiment) -> ExperimentOut:
    counts = dict(
        session.execute(select(Run.status, func.count()).where(Run.experiment_id == exp.id).group_by(Run.status)).all()
    )
    return ExperimentOut(
        id=exp.id,
        name=exp.name,
        policy=exp.policy_mode,
        created_at=as_utc(exp.created_at),
        document=exp.document,
        fit_prior=ExperimentSpec.of(exp).fit.describe(),
        n_runs=sum(counts.values()),
        status_counts={str(k): int(v) for k, v in counts.items()},
    )


def token_out(row: ApiToken) -> TokenOut:
    return TokenOut(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        scopes=token_scopes(row),
        created_at=as_utc(row.created_at),
        revoked_at=as_utc(row.revoked_at),
    )
