"""Read models for the dashboard under ``/api/v1/dashboard``: server-side downsampled charts, rankings, the
ceiling-vs-efficiency comparison, run series, fit histories and engine logs. Same tokens and scopes as the rest of
the API."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.concurrency import run_in_threadpool

from server.assess.assessing import latest
from server.assess.charts.chart import build_chart
from server.assess.charts.metrics import UnknownRuns, XAxis, metric_series
from server.assess.charts.run_views import fit_history, run_series
from server.assess.charts.schemas import (
    ChartOut,
    ExperimentSummary,
    FitHistory,
    MetricSeries,
    RunLog,
    RunSeries,
)
from server.assess.charts.summary import list_summaries
from server.assess.schemas import ComparisonOut
from server.base.types import MAX_ID
from server.lifecycle.experiments import get_experiment
from server.lifecycle.runlogs import MAX_TAIL_BYTES, LogUnavailable, read_tail
from server.lifecycle.runs import get_run
from server.lifecycle.spec import spec_of
from server.routes.deps import Ctx, Reader
from server.routes.errors import not_found
from server.routes.params import NO_NUL, ExperimentId, Offset, RunId

NOT_FOUND = not_found("experiment or run")
router = APIRouter(prefix="/dashboard", tags=["dashboard"])

MaxPoints = Annotated[int, Query(ge=10, le=5000, description="Points per run at most (downsampled with LTTB).")]


@router.get("/experiments", response_model=list[ExperimentSummary])
def experiments(
    ctx: Ctx,
    _: Reader,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    offset: Offset = 0,
) -> list[ExperimentSummary]:
    """Experiments, newest first, with status counts, compute, best fitted ceiling and recommendation counts."""
    with ctx.sessions() as session:
        return list_summaries(session, limit, offset)


def _chart(ctx: Ctx, experiment_id: int, max_points: int, highlight: int, include: list[int]) -> ChartOut:
    with ctx.sessions() as session:
        spec = spec_of(session, experiment_id)
        return build_chart(
            session, spec, ctx.parsed, ctx.curves, max_points=max_points, highlight=highlight, include=include
        )


@router.get("/experiments/{experiment_id}/chart", response_model=ChartOut, responses=NOT_FOUND)
async def chart(
    experiment_id: ExperimentId,
    ctx: Ctx,
    _: Reader,
    max_points: MaxPoints = 200,
    highlight: Annotated[int, Query(ge=0, le=50, description="Draw bands for the top runs by ceiling.")] = 8,
    include: Annotated[list[int], Query(max_length=50, description="Also highlight these run ids.")] = [],  # noqa: B006
) -> ChartOut:
    """Every run's points (downsampled so the whole chart holds about 20,000), fitted sigmoid, extrapolation to
    the budget, and the predictive band of the highlighted runs; ranks by ceiling and by forecast at budget."""
    ids = [i for i in include if 1 <= i <= MAX_ID]
    return await run_in_threadpool(_chart, ctx, experiment_id, max_points, highlight, ids)


def _comparison(ctx: Ctx, experiment_id: int) -> ComparisonOut:
    with ctx.sessions() as session:
        return latest(session, spec_of(session, experiment_id), ctx.parsed).comparison


@router.get("/experiments/{experiment_id}/comparison", response_model=ComparisonOut, responses=NOT_FOUND)
async def comparison(experiment_id: ExperimentId, ctx: Ctx, _: Reader) -> ComparisonOut:
    """Each run against the reference (the leave-one-out base, else the best ceiling): does it change the
    ceiling A or only the efficiency? Read from the stored assessment: the same fits as the runs table."""
    return await run_in_threadpool(_comparison, ctx, experiment_id)


def _series(ctx: Ctx, run_id: int, max_points: int) -> RunSeries:
    with ctx.sessions() as session:
        run = get_run(session, run_id)
        return run_series(session, run, spec_of(session, run.experiment_id), ctx.parsed, max_points)


@router.get("/runs/{run_id}/series", response_model=RunSeries, responses=NOT_FOUND)
async def series(run_id: RunId, ctx: Ctx, _: Reader, max_points: MaxPoints = 400) -> RunSeries:
    """The run's pass rate against compute and every other metric against step (downsampled), with its forecast."""
    return await run_in_threadpool(_series, ctx, run_id, max_points)


def _history(ctx: Ctx, run_id: int, max_points: int) -> FitHistory:
    with ctx.sessions() as session:
        return fit_history(session, get_run(session, run_id), max_points)


@router.get("/runs/{run_id}/fit-history", response_model=FitHistory, responses=NOT_FOUND)
async def history(run_id: RunId, ctx: Ctx, _: Reader, max_points: MaxPoints = 200) -> FitHistory:
    """How the forecast of A and of the pass rate at budget moved as data came in, and what was observed."""
    return await run_in_threadpool(_history, ctx, run_id, max_points)


def _log(ctx: Ctx, run_id: int, tail_bytes: int) -> RunLog:
    with ctx.sessions() as session:
        run = get_run(session, run_id)
        status = run.status
    assert ctx.settings.runs_dir is not None  # set by Settings
    try:
        tail = read_tail(ctx.settings.runs_dir, run_id, tail_bytes)
    except LogUnavailable as exc:
        return RunLog(run_id=run_id, run_status=status, available=False, reason=str(exc))  # type: ignore[arg-type]
    return RunLog(
        run_id=run_id,
        run_status=status,  # type: ignore[arg-type]
        available=True,
        size=tail.size,
        truncated=tail.truncated,
        lines=tail.lines,
        error_lines=tail.error_lines,
    )


@router.get("/runs/{run_id}/log", response_model=RunLog, responses=NOT_FOUND)
async def run_log(
    run_id: RunId,
    ctx: Ctx,
    _: Reader,
    tail_bytes: Annotated[
        int, Query(ge=1, le=MAX_TAIL_BYTES, description="Return at most this many bytes from the end of the log.")
    ] = 64 * 1024,
) -> RunLog:
    """The tail of the run's engine log, with the last traceback and error lines marked, when this server shares the
    workers' run directories (``runs_dir``); otherwise ``available`` is false and ``reason`` says why."""
    return await run_in_threadpool(_log, ctx, run_id, tail_bytes)


def _metrics(ctx: Ctx, experiment_id: int, runs: list[int], metric: str, x: XAxis, max_points: int) -> MetricSeries:
    with ctx.sessions() as session:
        exp = get_experiment(session, experiment_id)
        try:
            return metric_series(session, exp, runs, metric, x, max_points)
        except UnknownRuns as exc:
            raise HTTPException(422, str(exc)) from None


@router.get("/experiments/{experiment_id}/metrics", response_model=MetricSeries, responses=NOT_FOUND)
async def metrics(
    experiment_id: ExperimentId,
    ctx: Ctx,
    _: Reader,
    metric: Annotated[
        str, Query(min_length=1, max_length=200, pattern=NO_NUL, description="pass_rate or a logged metric.")
    ] = "pass_rate",
    x: Annotated[
        XAxis,
        Query(description="The x axis: step, compute, or time (seconds since the run's first point, as received)."),
    ] = "step",
    run: Annotated[list[int], Query(max_length=32, description="Run ids (default: the first 8 runs).")] = [],  # noqa: B006
    max_points: MaxPoints = 400,
) -> MetricSeries:
    """One metric of chosen runs against step, compute or wall time, for comparing runs (seed groups marked)."""
    return await run_in_threadpool(_metrics, ctx, experiment_id, run, metric, x, max_points)
