"""Experiments: create from a grid document (JSON or YAML, with dry run), read, recommendations, verdict,
scorecard."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy import select

from rl_core.contracts.data_roots import is_hub_id
from server.assess.assessing import latest
from server.assess.fit_schemas import RecommendationsOut
from server.assess.jobs import JobAccepted, recommendations_out, status_url
from server.assess.recommending import latest_recommendations
from server.assess.schemas import AssessmentOut, ScorecardOut
from server.assess.scorecard import read_scorecard
from server.assess.verdict import DEFAULT_CONFIDENCE, at_confidence
from server.assess.verdict_schemas import VerdictOut
from server.base.safeinput import UnsafeInput, check_sizes, clip, loads_json
from server.base.schemas import ErrorOut
from server.base.types import MAX_ID
from server.base.yamlsafe import load_yaml
from server.lifecycle.datapaths import path_problems
from server.lifecycle.evaluations import estimate
from server.lifecycle.evaluations import warning as evaluation_warning
from server.lifecycle.experiments import check_grid_budget, create_experiment, get_experiment
from server.lifecycle.grid import GridDocument, GridDocumentError, expand, parse_document
from server.lifecycle.runs import Conflict
from server.lifecycle.schemas import (
    DryRunOut,
    EvaluationsOut,
    ExpandedRun,
    ExperimentCreated,
    ExperimentDetail,
    ExperimentOut,
)
from server.lifecycle.spec import spec_of
from server.lifecycle.team_prior import resolve_team_prior
from server.routes.deps import Ctx, Reader, ReadSession, Writer
from server.routes.errors import not_found
from server.routes.params import RECIPES_PAGE, ExperimentId, Offset, WithRecipes, check_recipe_page
from server.routes.views import experiment_out, run_out
from server.runtime.context import ServiceContext
from server.store.db import read_session
from server.store.models import Experiment, Run

#: Largest grid document (JSON; YAML ones: :data:`server.base.safeinput.MAX_YAML_BYTES`).
MAX_DOCUMENT_BYTES = 1024 * 1024
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")

NOT_FOUND = not_found("experiment")
router = APIRouter(prefix="/experiments", tags=["experiments"])

_DOC_SCHEMA = {"$ref": "#/components/schemas/GridDocument"}


def parse_body(raw: bytes, content_type: str) -> Any:
    """A grid document from JSON or YAML bytes (YAML when the content type says so)."""
    try:
        text = raw.decode("utf-8", errors="strict")
        if content_type.split(";")[0].strip().lower() in YAML_TYPES:
            return load_yaml(text)  # limits enforced while parsing
        return loads_json(text)
    except UnsafeInput as exc:
        raise HTTPException(422, str(exc)) from None
    except (ValueError, yaml.YAMLError) as exc:
        # The parsers' messages quote a few characters around the error at most; clipped anyway.
        kind = "YAML" if "yaml" in content_type else "JSON"
        raise HTTPException(422, f"the body is not a valid {kind} document: {clip(str(exc), 300)}") from None


HUB_ID_WARNING = (
    "model {model!r} is a Hugging Face hub id: scalerl workers load a local directory (its absolute path, under "
    "allowed_data_roots) or a preset (tiny, small, qwen2-0.5b, qwen2-1.5b), so they will fail these runs; trainers "
    "of your own that claim them may use it as they like"
)


def _document(ctx: ServiceContext, raw: bytes, content_type: str) -> GridDocument:
    """The validated grid document of a request body; every size limit is checked before the work it bounds:
    the document's bytes, then its strings and lists and its run count and stored size, then the validation."""
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise HTTPException(413, f"grid documents are at most {MAX_DOCUMENT_BYTES} bytes, got {len(raw)}")
    data = parse_body(raw, content_type)
    try:
        check_sizes(data)
    except UnsafeInput as exc:
        raise GridDocumentError([str(exc)]) from None
    check_grid_budget(data)
    doc = parse_document(data)
    refused = path_problems(doc.task, doc.model, ctx.settings.allowed_data_roots)
    if refused:
        raise GridDocumentError(refused)
    return doc


def _dry_run(ctx: ServiceContext, doc: GridDocument) -> DryRunOut:
    runs = [
        ExpandedRun(name=p.name, seed=p.seed, overrides=p.overrides, recipe=p.recipe, budget=p.budget)
        for p in expand(doc)
    ]
    with read_session(ctx.engine) as session:
        est = estimate(session, doc)
        fit = resolve_team_prior(session, doc).fit
    return DryRunOut(
        name=doc.name,
        runs=runs,
        n_runs=len(runs),
        total_budget=sum(r.budget for r in runs),
        evaluations=None if est is None else EvaluationsOut(**asdict(est)),
        warnings=([] if est is None or est.enough else [evaluation_warning(est, doc.compute_unit)])
        + ([HUB_ID_WARNING.format(model=clip(doc.model, 100))] if is_hub_id(doc.model) else []),
        fit_prior=fit.describe(),
    )


#: Runs in the creation answer unless the request asks for another number (a 4,096-run grid answered 7 MB).
CREATED_RUNS_PAGE = 100


def _create(ctx: ServiceContext, doc: GridDocument, actor: str, runs_limit: int, recipes: bool) -> ExperimentCreated:
    with read_session(ctx.engine) as session:
        if session.scalar(select(Experiment.id).where(Experiment.name == doc.name)) is not None:
            raise Conflict(f"an experiment named {doc.name!r} already exists")  # before a large grid is expanded
    planned = expand(doc)  # CPU-bound: before the write transaction, so SQLite's write lock is not held meanwhile
    with ctx.sessions.begin() as session:
        exp, _ = create_experiment(session, doc, actor, planned)
        out = experiment_out(session, exp)
        stmt = select(Run).where(Run.experiment_id == exp.id).order_by(Run.id).limit(runs_limit)
        runs = session.scalars(stmt).all() if runs_limit > 0 else []
        more = out.n_runs > len(runs)
        page = f"&limit={RECIPES_PAGE}&recipes=true" if recipes else "&limit=1000"
        link = f"/api/v1/runs?experiment_id={exp.id}&offset={len(runs)}{page}" if more else None
        created = ExperimentCreated(**out.model_dump(), runs=[run_out(r, recipes) for r in runs], runs_next=link)
    ctx.notifier.notify()
    return created


@router.post(
    "",
    status_code=201,
    response_model=ExperimentCreated | DryRunOut,
    responses={
        200: {"model": DryRunOut, "description": "Dry run: the expanded runs and their total budget"},
        409: {"model": ErrorOut, "description": "An experiment with this name exists"},
        413: {"model": ErrorOut, "description": "Body too large"},
        422: {"model": ErrorOut, "description": "Invalid document: every problem, by key"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": _DOC_SCHEMA},
                "application/yaml": {"schema": _DOC_SCHEMA},
            },
        }
    },
)
async def create(
    request: Request,
    ctx: Ctx,
    who: Writer,
    dry_run: Annotated[bool, Query(description="Validate and expand only; store nothing.")] = False,
    runs_limit: Annotated[
        int,
        Query(ge=0, le=4096, description="Runs in the answer (the first ones); the rest: `runs_next`."),
    ] = CREATED_RUNS_PAGE,
    recipes: WithRecipes = False,
) -> Any:
    """Create an experiment and its queued runs from a grid document (JSON, or YAML with a YAML content type).

    The whole document is validated, recipes included, before anything is stored. With ``dry_run=true`` the
    answer (200) lists the runs and their total budget instead, with the evaluations a run is expected to make
    (from earlier runs of the same task and model) and a warning when they are too few to fit. The creation answer
    (201) holds the first ``runs_limit`` runs (100 by default; ``n_runs`` counts all), with their overrides and,
    with ``recipes=true`` (at most 256 runs then), their full recipes, and ``runs_next``, the ``GET /api/v1/runs``
    page that continues them.
    """
    check_recipe_page(recipes, runs_limit)
    raw = await request.body()
    if len(raw) > ctx.settings.max_body_bytes:
        raise HTTPException(413, f"body of {len(raw)} bytes exceeds the limit of {ctx.settings.max_body_bytes}")
    # Parsing and validating are CPU-bound (YAML above all): in the bounded parse pool (503 beyond it), never on the
    # event loop or in the worker-thread pool that every other endpoint shares.
    doc = await ctx.parser.run(_document, ctx, raw, request.headers.get("content-type", "application/json"))
    if dry_run:
        out = await run_in_threadpool(_dry_run, ctx, doc)
        return JSONResponse(out.model_dump(mode="json"), status_code=200)
    return await run_in_threadpool(_create, ctx, doc, who.name, runs_limit, recipes)


@router.get("", response_model=list[ExperimentOut])
def list_experiments(
    session: ReadSession,
    _: Reader,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Offset = 0,
) -> list[ExperimentOut]:
    exps = session.scalars(select(Experiment).order_by(Experiment.id).limit(limit).offset(offset)).all()
    return [experiment_out(session, e) for e in exps]


#: Runs in one page of ``GET /api/v1/experiments/{id}`` by default, and at most (the ``default`` experiment grows
#: without bound; a 256-run grid answered 257 MB before recipes were stored once).
RUNS_PAGE = 1000
MAX_RUNS_PAGE = 10_000


@router.get("/{experiment_id}", response_model=ExperimentDetail, responses=NOT_FOUND)
def read_experiment(
    experiment_id: ExperimentId,
    session: ReadSession,
    _: Reader,
    runs_limit: Annotated[
        int,
        Query(ge=0, le=MAX_RUNS_PAGE, description=f"Runs in this page (default {RUNS_PAGE}, at most {MAX_RUNS_PAGE})."),
    ] = RUNS_PAGE,
    runs_offset: Annotated[int, Query(ge=0, le=MAX_ID, description="Runs to skip, in id order.")] = 0,
    recipes: WithRecipes = False,
) -> ExperimentDetail:
    """The experiment and one page of its runs in id order, with their overrides (their full recipes only with
    ``recipes=true``, in pages of at most 256 runs); ``runs_next`` is the URL of the next page (null on the
    last), ``n_runs`` counts them all."""
    check_recipe_page(recipes, runs_limit)
    exp = get_experiment(session, experiment_id)
    out = experiment_out(session, exp)
    stmt = select(Run).where(Run.experiment_id == exp.id).order_by(Run.id).offset(runs_offset).limit(runs_limit)
    runs = session.scalars(stmt).all() if runs_limit > 0 else []
    end = runs_offset + len(runs)
    more = out.n_runs > end and runs_limit > 0
    with_recipes = "&recipes=true" if recipes else ""
    link = f"/api/v1/experiments/{exp.id}?runs_offset={end}&runs_limit={runs_limit}{with_recipes}" if more else None
    return ExperimentDetail(**out.model_dump(), runs=[run_out(r, recipes) for r in runs], runs_next=link)


@router.get("/{experiment_id}/recommendations", response_model=RecommendationsOut, responses=NOT_FOUND)
def read_recommendations(experiment_id: ExperimentId, session: ReadSession, _: Reader) -> RecommendationsOut:
    """The latest stored recommendations (refreshed off the request path after each metrics batch), for the runs
    still running or queued: a finished run (succeeded, failed, stopped) gets no stop/continue/scale advice."""
    exp = get_experiment(session, experiment_id)
    return recommendations_out(session, exp, latest_recommendations(session, exp.id))


@router.post(
    "/{experiment_id}/recommendations",
    status_code=202,
    response_model=JobAccepted,
    responses={**NOT_FOUND, 202: {"description": "The job (new, or the one already queued or running)"}},
)
def refresh_recommendations(experiment_id: ExperimentId, ctx: Ctx, who: Writer, response: Response) -> JobAccepted:
    """Assess the experiment again (fits, decisions, verdict; and apply ``auto_stop``) and store the recommendations,
    off the request: answers at once with a job (``Location``: its status URL, ``GET /api/v1/jobs/{id}``, whose
    ``result`` is the stored recommendations once it succeeded). While the experiment's job is queued or running,
    a POST answers that same job."""
    job, _ = ctx.jobs.submit(experiment_id, who.name)
    response.headers["Location"] = status_url(job.id)
    return JobAccepted(job_id=job.id, status=job.status, status_url=status_url(job.id))  # type: ignore[arg-type]


@router.get("/{experiment_id}/assessment", response_model=AssessmentOut, responses=NOT_FOUND)
def read_assessment(experiment_id: ExperimentId, session: ReadSession, ctx: Ctx, _: Reader) -> AssessmentOut:
    """The experiment's stored assessment: every run's fit summary, decision and forecast curves, the verdict, the
    ceiling-or-efficiency card and the counts, from one computation (``version``, ``computed_at``). Never fits on
    the request; ``pending`` says a newer one is being computed."""
    out = latest(session, spec_of(session, experiment_id), ctx.parsed)
    if out.pending:
        ctx.refit_soon(experiment_id)
    return out


@router.get("/{experiment_id}/scorecard", response_model=ScorecardOut, responses=NOT_FOUND)
def read_experiment_scorecard(experiment_id: ExperimentId, session: ReadSession, ctx: Ctx, _: Reader) -> ScorecardOut:
    """What the decisions did on this grid: compute the stops saved against running every run to its budget, when
    the verdict was first decided and whether it changed, each stopped run's forecast at its stop, each succeeded
    run's early forecasts against its final value, and the alerts raised. Read from the stored assessment and the
    moments recorded as each was stored (docs/api.md, "The scorecard"); never fits."""
    out = latest(session, spec_of(session, experiment_id), ctx.parsed)
    if out.pending:
        ctx.refit_soon(experiment_id)
    return read_scorecard(session, out)


@router.get("/{experiment_id}/verdict", response_model=VerdictOut, responses=NOT_FOUND)
def read_verdict(
    experiment_id: ExperimentId,
    session: ReadSession,
    ctx: Ctx,
    _: Reader,
    min_confidence: Annotated[float, Query(gt=0.5, lt=1.0)] = DEFAULT_CONFIDENCE,
    decide_early: Annotated[
        bool,
        Query(
            description="Decide among the runs that have a forecast, ignoring queued, running or resumable runs "
            "that have none yet (they could still win; by default the verdict waits for them)."
        ),
    ] = False,
) -> VerdictOut:
    """Which run is best, by how much, how sure, and whether that is decided (the CI gate), from the stored
    assessment: undecided while a run that could still win has no usable forecast (``waiting_for``)."""
    out = latest(session, spec_of(session, experiment_id), ctx.parsed)
    if out.pending:
        ctx.refit_soon(experiment_id)
    return at_confidence(out.verdict, min_confidence, decide_early)
