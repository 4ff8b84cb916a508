"""Jobs: the status of work a request started (``POST /api/v1/experiments/{id}/recommendations``), from any server
process behind the database (:mod:`server.assess.jobs`). A read: never counted by the write admission."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool

from server.assess.jobs import MAX_WAIT_S, JobOut, read_job
from server.routes.deps import Ctx, Reader
from server.routes.errors import not_found

router = APIRouter(prefix="/jobs", tags=["jobs"])

#: How often a waiting GET reads a job that another process runs (this process's jobs wake it at once).
POLL_S = 0.5


@router.get("/{job_id}", response_model=JobOut, responses=not_found("job"))
async def get_job(
    job_id: Annotated[str, Path(min_length=1, max_length=64, description="The id a POST answered")],
    ctx: Ctx,
    _: Reader,
    wait: Annotated[
        float,
        Query(ge=0, le=MAX_WAIT_S, description="Seconds to wait for the job to finish before answering (at most 60)."),
    ] = 0,
) -> JobOut:
    """The job's status (``queued``, ``running``, ``succeeded``, ``failed``), when it started and finished, and its
    ``result`` (succeeded) or ``error`` (failed). With ``wait``, answers as soon as the job finished, or after
    ``wait`` seconds with its status then."""
    deadline = time.monotonic() + wait
    while True:
        out = await run_in_threadpool(read_job, ctx.engine, job_id)
        left = deadline - time.monotonic()
        if out.status in ("succeeded", "failed") or left <= 0:
            return out
        await ctx.notifier.wait(min(left, POLL_S))
