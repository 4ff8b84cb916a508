"""Experiments for your own runs: create one by name (no grid document, no planned runs), or get it."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from server.base.schemas import ErrorOut
from server.lifecycle.datapaths import path_problems
from server.lifecycle.experiments import create_tracking_experiment, get_experiment, tracking_document
from server.lifecycle.grid import PolicySpec, policy_document
from server.lifecycle.schemas import ExperimentOut, TrackingExperimentCreate
from server.routes.deps import Ctx, DbSession, Writer
from server.routes.errors import not_found
from server.routes.params import ExperimentId
from server.routes.views import experiment_out
from server.store.events import emit

router = APIRouter(prefix="/experiments", tags=["experiments"])


@router.post(
    "/tracking",
    status_code=201,
    response_model=ExperimentOut,
    responses={
        200: {"model": ExperimentOut, "description": "`exist_ok`: the experiment of that name, as it is"},
        409: {"model": ErrorOut, "description": "The name exists (without `exist_ok`), or records another unit"},
        422: {"model": ErrorOut, "description": "Invalid body"},
    },
)
def create_tracking(
    body: TrackingExperimentCreate, session: DbSession, ctx: Ctx, who: Writer, response: Response
) -> ExperimentOut:
    """Create an experiment for runs trained elsewhere, by name, with its compute unit, a default run budget and
    free-text task/model labels that its runs inherit. With ``exist_ok`` an existing experiment of that name is
    returned (200) when it records the same compute unit."""
    refused = path_problems(body.task, body.model, ctx.settings.allowed_data_roots)
    if refused:
        raise HTTPException(422, refused)
    doc = tracking_document(
        body.name,
        compute_unit=body.compute_unit,
        budget=body.budget,
        task=body.task,
        model=body.model,
        description=body.description,
    )
    if body.policy is not None:
        doc["policy"] = policy_document(body.policy)
    exp, created = create_tracking_experiment(session, doc, exist_ok=body.exist_ok)
    if created:
        exp.policy_mode = body.policy.mode if body.policy is not None else "recommend"
    else:
        response.status_code = 200
    session.flush()
    return experiment_out(session, exp)


@router.put(
    "/{experiment_id}/policy",
    response_model=ExperimentOut,
    responses=not_found("experiment"),
)
def change_policy(
    experiment_id: ExperimentId, body: PolicySpec, session: DbSession, ctx: Ctx, who: Writer
) -> ExperimentOut:
    """Replace how the experiment's recommendations are used (``mode``: ``recommend`` or ``auto_stop``) and the
    decision's numbers (docs/decisions.md); fields left out take their defaults. The experiment is assessed again
    with it at once; an ``auto_stop`` turned on stops the runs its next assessment tells to stop (not before)."""
    exp = get_experiment(session, experiment_id)
    exp.document = {**exp.document, "policy": policy_document(body)}  # a new dict: the JSON column sees the change
    exp.policy_mode = body.mode
    emit(session, exp.id, "policy", {"mode": body.mode, "by": who.name})
    session.info["after_commit"] = [lambda: ctx.refit_soon(experiment_id), ctx.notifier.notify]
    session.flush()
    return experiment_out(session, exp)
