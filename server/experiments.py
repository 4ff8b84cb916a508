"""Experiments: creation from a grid document (validated and expanded before anything is stored) and lookup."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.grid import GridDocument, PlannedRun, expand
from server.models import Experiment
from server.runs import Conflict, NotFound, create_run
from server.team_prior import resolve_team_prior

DEFAULT_EXPERIMENT = "default"


def get_experiment(session: Session, experiment_id: int) -> Experiment:
    exp = session.get(Experiment, experiment_id)
    if exp is None:
        raise NotFound(f"experiment {experiment_id} does not exist")
    return exp


def default_experiment(session: Session) -> Experiment:
    """The experiment that directly registered runs join when they name none (created on first use)."""
    exp = session.scalar(select(Experiment).where(Experiment.name == DEFAULT_EXPERIMENT))
    if exp is not None:
        return exp
    doc: dict[str, Any] = {"name": DEFAULT_EXPERIMENT, "description": "runs registered without an experiment"}
    try:
        # Create-or-get, atomically: a concurrent first registration that created it wins; this one reads it.
        with session.begin_nested():
            exp = Experiment(name=DEFAULT_EXPERIMENT, document=doc, policy_mode="recommend")
            session.add(exp)
    except IntegrityError:
        exp = session.scalar(select(Experiment).where(Experiment.name == DEFAULT_EXPERIMENT))
        assert exp is not None
    return exp


def create_experiment(session: Session, doc: GridDocument, actor: str) -> tuple[Experiment, list[PlannedRun]]:
    """Store the experiment and one queued run per grid cell, in one transaction."""
    if doc.name == DEFAULT_EXPERIMENT:
        raise Conflict(f"the name {DEFAULT_EXPERIMENT!r} is reserved for runs registered without an experiment")
    # The name first: a duplicate is refused before a (possibly large) grid is expanded.
    if session.scalar(select(Experiment.id).where(Experiment.name == doc.name)) is not None:
        raise Conflict(f"an experiment named {doc.name!r} already exists")
    planned = expand(doc)
    doc = resolve_team_prior(session, doc)
    exp = Experiment(name=doc.name, document=doc.model_dump(mode="json"), policy_mode=doc.policy.mode)
    session.add(exp)
    session.flush()
    for p in planned:
        create_run(
            session,
            exp,
            actor,
            name=p.name,
            seed=p.seed,
            task=doc.task,
            model=doc.model,
            recipe=p.recipe,
            overrides=p.overrides,
            budget=p.budget,
        )
    return exp, planned
