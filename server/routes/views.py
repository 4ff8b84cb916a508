"""ORM rows -> response models (the only place that shapes responses)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.assess.assessing import ParsedAssessments, value_at_budget
from server.assess.fit_schemas import CurveFitBody, FitOut, FitSummary
from server.assess.point_fit import point_fit_stale
from server.base.rows import from_row
from server.lifecycle.recipes import effective_recipe
from server.lifecycle.schemas import ExperimentOut, RunOut, TokenOut, TransitionOut
from server.lifecycle.spec import ExperimentSpec
from server.lifecycle.status import action_for
from server.lifecycle.tokens import token_scopes
from server.routes.schemas import RunDetail
from server.store.models import ApiToken, Experiment, FitSnapshot, Run, RunTransition


def run_out(run: Run, recipe: bool = True) -> RunOut:
    """A run as answered; lists leave its full recipe out (``recipe`` False: null) unless asked, so an answer's size
    follows its run count, not run count × recipe size (17 KB of grid answered 71.8 MB with every recipe)."""
    return from_row(RunOut, run, recipe=effective_recipe(run) if recipe else None, action=action_for(run.status))


def fit_out(snap: FitSnapshot) -> FitOut:
    return from_row(FitOut, snap, fit=CurveFitBody.model_validate(snap.body))


def fit_summary(snap: FitSnapshot) -> FitSummary:
    return from_row(FitSummary, snap, message=str(snap.body.get("message", "")))


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
        transitions=[from_row(TransitionOut, t) for t in transitions],
        fit=None if point is None else fit_out(point),
        forecast=None if full is None else fit_out(full),
        at_budget=value_at_budget(session, run, parsed),
        fit_pending=point_fit_stale(session, run),
    )


def experiment_out(session: Session, exp: Experiment) -> ExperimentOut:
    counts = dict(
        session.execute(select(Run.status, func.count()).where(Run.experiment_id == exp.id).group_by(Run.status)).all()
    )
    return from_row(
        ExperimentOut,
        exp,
        policy=exp.policy_mode,
        fit_prior=ExperimentSpec.of(exp).fit.describe(),
        n_runs=sum(counts.values()),
        status_counts={str(k): int(v) for k, v in counts.items()},
    )


def token_out(row: ApiToken) -> TokenOut:
    return from_row(TokenOut, row, scopes=token_scopes(row))
