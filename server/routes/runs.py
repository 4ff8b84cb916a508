"""Runs: registration, metrics ingestion (with the trainer's action), fits, control, and worker leases."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.assess.eta import reach
from server.assess.fit_schemas import FitOut, ReachOut
from server.assess.point_fit import point_fit_stale
from server.base.rows import from_row
from server.base.safeinput import MAX_PROBLEMS, UnsafeInput, check_sizes, clip_problems
from server.base.schemas import ErrorOut
from server.base.types import MAX_ID
from server.intake.batch import BatchError, ParsedBatch, parse_batch
from server.intake.ingest import ingest
from server.intake.schemas import MetricPoint as PointOut
from server.lifecycle.datapaths import path_problems
from server.lifecycle.experiments import default_experiment, get_experiment, inherited_labels, unit_problem
from server.lifecycle.grid import GridDocumentError, base_recipe_data
from server.lifecycle.identity import resolve
from server.lifecycle.run_query import SORT_COLUMNS, QueryProblem, parse_query, select_runs
from server.lifecycle.runs import (
    Conflict,
    check_lease,
    check_unleased_start,
    claim,
    create_run,
    get_run,
    get_run_and_experiment,
    heartbeat,
    own_heartbeat,
    reopen,
    seen,
    set_budget,
    transition,
)
from server.lifecycle.schemas import (
    BudgetChange,
    ClaimIn,
    HeartbeatIn,
    HeartbeatOut,
    Lease,
    Reason,
    RunCreate,
    RunLabels,
    RunOut,
    StatusChange,
)
from server.lifecycle.spec import spec_of
from server.lifecycle.status import RESUMABLE, RETRYABLE, STATUSES, RunStatus, action_for
from server.routes.deps import Ctx, DbSession, Reader, ReadSession, Writer
from server.routes.errors import CONFLICT, not_found
from server.routes.params import NO_NUL, Offset, RunId, WithRecipes, check_recipe_page
from server.routes.schemas import MetricsResult, RunDetail
from server.routes.views import fit_out, fit_summary, run_detail, run_out
from server.runtime.context import ServiceContext
from server.store.db import where_given, with_retries
from server.store.models import FitSnapshot, Run, StoredPoint, utcnow

NOT_FOUND = not_found("run")
router = APIRouter(prefix="/runs", tags=["runs"])


@router.post(
    "",
    status_code=201,
    response_model=RunOut,
    responses={
        200: {"model": RunOut, "description": "Attached to the run of that name (see `resume`)"},
        **NOT_FOUND,
        **CONFLICT,
    },
)
def register_run(body: RunCreate, session: DbSession, ctx: Ctx, who: Writer, response: Response) -> RunOut:
    """Register a run directly (e.g. a TRL or verl trainer that only wants forecasts). It starts ``queued`` and
    becomes ``running`` with its first metrics. ``key`` is the run's identity as its client knows it (W&B's run id):
    the run holding it is the one meant. ``resume`` says what a key or name that exists means (as W&B's): a 409
    (``never``, the default), the same run (200; reopened if it ended) under ``allow``/``must`` (``must``: 404 when
    there is none) or, with ``auto``, the run of that key, else the run of that name when no trainer is alive in it,
    else a new run (``<name>-2``, ... when the name is taken). A run registered with a heartbeat promise and silent
    past it becomes ``lost`` with an alert, queued or not."""
    refused = path_problems(body.task, body.model, ctx.settings.allowed_data_roots)
    if refused:
        raise HTTPException(422, refused)
    exp = get_experiment(session, body.experiment_id) if body.experiment_id is not None else default_experiment(session)
    match = resolve(session, exp, body.name, body.key, body.resume)
    if match.existing is not None:
        run = match.existing
        reopen(session, run, who.name)
        if body.key is not None and run.key is None:
            run.key = body.key
        seen(session, run, who.name, body.heartbeat_seconds)
        session.info["after_commit"] = [ctx.notifier.notify]
        response.status_code = 200
        return run_out(run)
    unit = unit_problem(exp, body.compute_unit)
    if unit is not None:
        raise HTTPException(422, unit)
    recipe = None
    if body.recipe is not None or body.preset is not None:
        try:
            check_sizes(body.recipe)
        except UnsafeInput as exc:
            raise HTTPException(422, str(exc)) from None
        try:
            recipe = base_recipe_data(body.preset, body.recipe)
        except GridDocumentError as exc:
            raise HTTPException(422, clip_problems(exc.problems)) from None
    labels = inherited_labels(exp)  # an experiment created by name gives its runs its labels and budget
    run = create_run(
        session,
        exp,
        who.name,
        name=match.name,
        task=body.task if body.task is not None else labels.get("task"),
        model=body.model if body.model is not None else labels.get("model"),
        budget=body.budget if body.budget is not None else labels.get("budget"),
        seed=body.seed,
        recipe=recipe,
        overrides={},
    )
    run.compute_unit = body.compute_unit
    run.key = body.key
    if body.heartbeat_seconds is not None:
        seen(session, run, who.name, body.heartbeat_seconds)  # its silence is measured from its registration
    run.config, run.tags, run.notes = body.config, body.tags, body.notes
    return run_out(run)


@router.get("", response_model=list[RunOut])
def list_runs(
    request: Request,
    session: ReadSession,
    _: Reader,
    experiment_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    status: Annotated[RunStatus | None, Query(description=f"One of {list(STATUSES)}")] = None,
    name: Annotated[
        str | None, Query(min_length=1, max_length=300, pattern=NO_NUL, description="Runs of this exact name.")
    ] = None,
    tag: Annotated[
        list[str] | None,
        Query(description="Runs having this tag; repeat it for runs having every one of them (at most 50)."),
    ] = None,
    sort: Annotated[
        str | None,
        Query(
            max_length=300,
            pattern=NO_NUL,
            description=f"The order, by a run column ({', '.join(SORT_COLUMNS)}) or by config.<key> or "
            "summary.<key> (runs without the key last); a leading '-' for descending, e.g. sort=-summary.best. "
            "Ties in id order. Default: id.",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    offset: Offset = 0,
    recipes: WithRecipes = False,
) -> list[RunOut]:
    """Runs in id order (or ``sort``'s), with their overrides; their full recipes only with ``recipes=true`` (pages
    of at most 256 runs then).

    Filters, all of which must hold: ``experiment_id``, ``status``, ``name``; ``config.<key>=<value>`` and
    ``summary.<key>=<value>`` (repeatable, one per key: the run's config or summary holds the key with that
    value, read as the stored value's type says: ``config.lr=0.001`` matches 1e-3 stored as a number,
    ``config.use_kl=true`` a boolean, ``config.loss=cispo`` a string; a dotted key is a key of that name, else a
    path into nested values); ``tag=<tag>`` (repeatable: runs having every tag). ``sort``: a run column or
    ``config.<key>``/``summary.<key>``, ``-`` first for descending; runs without the value sort last.

    Cost: config, summary and tag filters and a sort by a config or summary key read the id, config, summary and
    tags of every run the other filters select (at most 50,000: a 422 beyond it, asking for ``experiment_id`` or
    ``status``), then cut the page; pass ``experiment_id`` to keep that read small. A malformed filter
    (``config.`` without a key, ``config=...``, ``tags=...``) or an unknown ``sort`` field is a 422 naming what is
    allowed."""
    check_recipe_page(recipes, limit)
    try:
        query = parse_query(request.query_params.multi_items(), tag, sort)
    except QueryProblem as exc:
        raise HTTPException(422, str(exc)) from None
    stmt = where_given(select(Run), (Run.name, name), (Run.experiment_id, experiment_id), (Run.status, status))
    try:
        runs = select_runs(session, stmt, query, limit, offset)
    except QueryProblem as exc:
        raise HTTPException(422, str(exc)) from None
    return [run_out(r, recipes) for r in runs]


@router.get("/{run_id}", response_model=RunDetail, responses=NOT_FOUND)
def read_run(run_id: RunId, session: ReadSession, ctx: Ctx, _: Reader) -> RunDetail:
    """The run, its status history, its latest point fit and its latest forecast with intervals."""
    return run_detail(session, get_run(session, run_id), ctx.parsed)


@router.get("/{run_id}/reach", response_model=ReachOut, responses=NOT_FOUND)
def read_reach(
    run_id: RunId,
    session: ReadSession,
    ctx: Ctx,
    _: Reader,
    target: Annotated[float, Query(gt=0.0, lt=1.0, description="Target pass rate in (0, 1).")],
) -> ReachOut:
    """Compute to reach ``target`` (with its interval and the probability of ever reaching it), and the ETAs to the
    target and to the budget at the run's observed pace, from the run's full fit as computed off the request path:
    never fits here; ``fit_pending`` (and null compute) while that fit is being computed."""
    run = get_run(session, run_id)
    out = reach(session, run, spec_of(session, run.experiment_id), ctx.cache, target)
    if out.fit_pending:
        ctx.fit_run_soon(run.id)
    return out


@router.post(
    "/{run_id}/metrics",
    response_model=MetricsResult,
    responses={
        **NOT_FOUND,
        409: CONFLICT[409],
        422: {"model": ErrorOut, "description": "No point was valid, or the body is not a batch"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/MetricsBatchIn"}}},
        }
    },
)
async def post_metrics(
    run_id: RunId,
    request: Request,
    ctx: Ctx,
    who: Writer,
    lease_id: Annotated[
        str | None, Query(pattern=NO_NUL, description="The lease, when the run is leased by a worker.")
    ] = None,
) -> MetricsResult:
    """Store a batch of points (a MetricsBatchIn) and tell the trainer whether to continue or stop; the answer
    carries the run's stored forecast.

    Idempotent per (run, step). Invalid points are listed in ``rejected`` while the valid ones are stored; when
    no point is valid the answer is 422. The point fit (coalesced per run, ``fit_pending`` until it is stored), the
    intervals and the recommendations are refreshed off the request path.
    """
    body = await request.body()
    # Parsing and validation are CPU-bound, never on the event loop: a large body in the bounded parse pool (503
    # beyond it), a small one in the worker thread with the ingest.
    if len(body) > LARGE_BATCH_BYTES:
        batch = await ctx.parser.run(_parse, ctx, body)
        return await run_in_threadpool(_ingest_retrying, ctx, run_id, batch, lease_id, who.name)
    return await run_in_threadpool(_parse_and_ingest, ctx, run_id, body, lease_id, who.name)


#: Metrics bodies larger than this are parsed in the bounded parse pool (a 10,000-point batch is about 1 MB).
LARGE_BATCH_BYTES = 256 * 1024


def _parse(ctx: ServiceContext, body: bytes) -> ParsedBatch:
    try:
        return parse_batch(body, ctx.settings.max_points_per_batch)
    except BatchError as exc:
        raise HTTPException(422, str(exc)) from None


def _parse_and_ingest(ctx: ServiceContext, run_id: int, body: bytes, lease_id: str | None, actor: str) -> MetricsResult:
    return _ingest_retrying(ctx, run_id, _parse(ctx, body), lease_id, actor)


def _ingest_retrying(
    ctx: ServiceContext, run_id: int, batch: ParsedBatch, lease_id: str | None, actor: str
) -> MetricsResult:
    # A deadlock with the background refit (Postgres) or a busy SQLite file: the whole batch is simply retried.
    return with_retries(partial(_ingest, ctx, run_id, batch, lease_id, actor))


def _ingest(ctx: ServiceContext, run_id: int, batch: ParsedBatch, lease_id: str | None, actor: str) -> MetricsResult:
    with ctx.sessions.begin() as session:
        run, exp = get_run_and_experiment(session, run_id)
        check_lease(run, lease_id)
        check_unleased_start(session, run)
        out = ingest(session, run, exp, batch.points, batch.rejected, ctx.settings.forecast_factors, actor)
        result = MetricsResult(
            run_id=run.id,
            accepted=out.accepted,
            duplicates=out.duplicates,
            rejected=out.rejected[:MAX_PROBLEMS],  # the first 50 (by index); n_rejected counts them all
            n_rejected=len(out.rejected),
            status=run.status,  # type: ignore[arg-type]
            action=action_for(run.status),
            fit=None,
        )
        if out.rejected and out.accepted == 0 and out.duplicates == 0:
            raise HTTPException(422, result.model_dump(mode="json"))
        # Every answer, a resend that adds nothing included, carries the stored fit and whether it is behind the
        # stored evaluations (this batch's, or a batch's whose refit the server died before: durable, see
        # point_fit_stale); a fit that is behind is queued, never computed here.
        latest = session.get(FitSnapshot, run.latest_fit_id) if run.latest_fit_id is not None else None
        result.fit = None if latest is None else fit_summary(latest)
        result.fit_pending = out.refit or point_fit_stale(session, run)
    if result.fit_pending:
        ctx.refit_run_soon(run_id)
    if out.accepted:
        ctx.refit_soon(exp.id)
        ctx.notifier.notify()
    return result


@router.get("/{run_id}/metrics", response_model=list[PointOut], responses=NOT_FOUND)
def read_metrics(
    run_id: RunId,
    session: ReadSession,
    _: Reader,
    after_step: Annotated[int | None, Query(ge=0, le=MAX_ID, description="Only points with a larger step.")] = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
) -> list[PointOut]:
    """Stored points in step order."""
    get_run(session, run_id)
    stmt = select(StoredPoint).where(StoredPoint.run_id == run_id).order_by(StoredPoint.step).limit(limit)
    if after_step is not None:
        stmt = stmt.where(StoredPoint.step > after_step)
    return [from_row(PointOut, p) for p in session.scalars(stmt)]


@router.get("/{run_id}/fits", response_model=list[FitOut], responses=NOT_FOUND)
def read_fits(
    run_id: RunId,
    session: ReadSession,
    _: Reader,
    kind: Annotated[str | None, Query(pattern="^(point|full)$")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[FitOut]:
    """How the forecast moved: fit snapshots, newest first."""
    get_run(session, run_id)
    stmt = select(FitSnapshot).where(FitSnapshot.run_id == run_id).order_by(FitSnapshot.id.desc()).limit(limit)
    if kind is not None:
        stmt = stmt.where(FitSnapshot.kind == kind)
    return [fit_out(s) for s in session.scalars(stmt)]


def _control(session: Session, ctx: Ctx, run_id: int, to: str, reason: str, actor: str) -> RunOut:
    run = get_run(session, run_id, lock=True)
    transition(session, run, to, reason, actor)
    session.info["after_commit"] = [ctx.notifier.notify]
    return run_out(run)


@router.post("/{run_id}/status", response_model=RunOut, responses={**NOT_FOUND, **CONFLICT})
def report_status(run_id: RunId, body: StatusChange, session: DbSession, ctx: Ctx, who: Writer) -> RunOut:
    """A trainer or worker reports the status it reached (e.g. ``running``, ``stopped``, ``succeeded``,
    ``failed``); a leased run needs its ``lease_id``; a worker shutting down hands its run back with ``release``."""
    run = get_run(session, run_id, lock=True)
    check_lease(run, body.lease_id)
    if body.status == "running":
        check_unleased_start(session, run)
    if body.release and run.status in ("running", "stopping"):
        run.releases += 1
    return _control(session, ctx, run_id, body.status, body.reason, who.name)


@router.post("/{run_id}/stop", response_model=RunOut, responses={**NOT_FOUND, **CONFLICT})
def stop_run(run_id: RunId, session: DbSession, ctx: Ctx, who: Writer, body: Reason | None = None) -> RunOut:
    """Ask a run to stop: a running run becomes ``stopping`` (its trainer sees ``action: stop``), a queued one
    ``stopped``. Idempotent: a run already stopping or stopped is returned unchanged."""
    run = get_run(session, run_id, lock=True)
    if run.status in ("stopping", "stopped"):
        return run_out(run)
    to = "stopped" if run.status == "queued" else "stopping"
    return _control(session, ctx, run_id, to, (body or Reason()).reason, who.name)


@router.post("/{run_id}/resume", response_model=RunOut, responses={**NOT_FOUND, **CONFLICT})
def resume_run(run_id: RunId, session: DbSession, ctx: Ctx, who: Writer, body: Reason | None = None) -> RunOut:
    """Queue a ``stopped`` or ``succeeded`` run again (e.g. after extending its budget)."""
    return _requeue(session, ctx, run_id, who, body, RESUMABLE, "resumed")


@router.post("/{run_id}/retry", response_model=RunOut, responses={**NOT_FOUND, **CONFLICT})
def retry_run(run_id: RunId, session: DbSession, ctx: Ctx, who: Writer, body: Reason | None = None) -> RunOut:
    """Queue a ``failed`` or ``lost`` run again; its next start counts as a new attempt."""
    return _requeue(session, ctx, run_id, who, body, RETRYABLE, "retried")


def _requeue(
    session: Session, ctx: Ctx, run_id: int, who: Writer, body: Reason | None, allowed: tuple[str, ...], done: str
) -> RunOut:
    """Queue a run in one of the ``allowed`` statuses again (409 naming them otherwise); ``done`` is the verb of the
    default reason ("resumed", "retried")."""
    run = get_run(session, run_id, lock=True)
    if run.status not in allowed:
        raise Conflict(f"only {' or '.join(allowed)} runs can be {done}; run {run_id} is {run.status}")
    run.heartbeat_seconds = None  # queued by hand: no trainer promises anything until one registers again
    return _control(session, ctx, run_id, "queued", (body or Reason(reason=f"{done} by user")).reason, who.name)


@router.patch("/{run_id}", response_model=RunOut, responses=NOT_FOUND)
def change_labels(run_id: RunId, body: RunLabels, session: DbSession, ctx: Ctx, _: Writer) -> RunOut:
    """Change the run's description: ``tags`` and ``notes`` replace the stored ones; ``config`` and ``summary`` are
    merged key by key (a key set to null is removed). The comparison cards read the config: runs that differ in it
    are told apart."""
    run = get_run(session, run_id, lock=True)
    if body.config is not None:
        run.config = merged_values(run.config, body.config)
    if body.summary is not None:
        run.summary = merged_values(run.summary, body.summary)
    if body.tags is not None:
        run.tags = list(dict.fromkeys(body.tags)) or None
    if body.notes is not None:
        run.notes = body.notes or None
    run.updated_at = utcnow()
    session.info["after_commit"] = [lambda: ctx.refit_soon(run.experiment_id), ctx.notifier.notify]
    return run_out(run)


def merged_values(stored: dict[str, Any] | None, change: dict[str, Any]) -> dict[str, Any] | None:
    """``stored`` updated key by key with ``change``; a key set to None is removed (None when nothing is left)."""
    merged = {**(stored or {}), **change}
    return {k: v for k, v in merged.items() if v is not None} or None


@router.post("/{run_id}/budget", response_model=RunOut, responses={**NOT_FOUND, **CONFLICT})
def change_budget(run_id: RunId, body: BudgetChange, session: DbSession, ctx: Ctx, who: Writer) -> RunOut:
    """Extend (or set) a run's compute budget; it may not go below the compute already used."""
    run = get_run(session, run_id, lock=True)
    set_budget(session, run, body.budget, body.reason, who.name)
    session.info["after_commit"] = [lambda: ctx.refit_soon(run.experiment_id), ctx.notifier.notify]
    return run_out(run)


@router.post(
    "/claim",
    response_model=Lease,
    responses={204: {"description": "No queued run"}, **not_found("experiment")},
)
def claim_run(body: ClaimIn, session: DbSession, ctx: Ctx, who: Writer, response: Response) -> Lease | Response:
    """A worker takes the oldest queued run: it becomes ``running`` (attempt + 1) under a lease that the worker
    renews with heartbeats; a lease that expires makes the run ``lost``. An ``experiment_id`` that names no
    experiment is a 404 (not a 204 that would leave the worker waiting forever for runs that cannot exist)."""
    if body.experiment_id is not None:
        get_experiment(session, body.experiment_id)
    seconds = body.lease_seconds or ctx.settings.lease_seconds
    run = claim(session, body.worker, seconds, body.experiment_id)
    if run is None:
        return Response(status_code=204)
    session.info["after_commit"] = [ctx.notifier.notify]
    assert run.lease_id is not None and run.lease_expires_at is not None
    return Lease(run=run_out(run), lease_id=run.lease_id, lease_expires_at=run.lease_expires_at)


@router.post("/{run_id}/heartbeat", response_model=HeartbeatOut, responses={**NOT_FOUND, **CONFLICT})
def run_heartbeat(run_id: RunId, body: HeartbeatIn, session: DbSession, ctx: Ctx, who: Writer) -> HeartbeatOut:
    """Renew the lease; the answer carries the action (``stop`` once the run was asked to stop). Without a
    ``lease_id``: a trainer of its own says it is alive (``heartbeat_seconds``: how often it will say so; a run that
    misses ``silent_after_heartbeats`` of them becomes ``lost`` with an alert, and ``running`` again on its next
    report)."""
    run = get_run(session, run_id, lock=True)
    if body.lease_id is None:
        own_heartbeat(session, run, who.name, body.heartbeat_seconds)
    else:
        heartbeat(session, run, body.lease_id, body.lease_seconds or ctx.settings.lease_seconds)
    return HeartbeatOut(
        run_id=run.id,
        status=run.status,  # type: ignore[arg-type]
        action=action_for(run.status),
        lease_expires_at=run.lease_expires_at,
    )
