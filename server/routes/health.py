"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness).

Invariants: ``/healthz`` is an ``async`` endpoint that touches neither the worker-thread pool nor the database, so it
answers from the event loop however busy both are (a liveness probe that waits restarts a healthy service).
``/readyz`` asks the database (autocommit, with its own one-thread executor and a deadline, never the shared pool)
and reports how far the background fitters lag; it is the probe that takes a replica out of a load balancer.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, text

from server.base.version import VERSION
from server.http.errors import RETRY_AFTER
from server.routes.deps import Ctx
from server.routes.schemas import Health, Readiness

router = APIRouter(tags=["health"])

#: Seconds ``/readyz`` waits for the database before it answers 503.
READY_DB_TIMEOUT_S = 2.0
#: A background fitter whose oldest due key waits longer than this makes ``/readyz`` answer 503.
READY_MAX_LAG_S = 300.0

_probe = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalerl-readyz")


@router.get("/healthz", response_model=Health)
async def healthz(ctx: Ctx) -> Health:
    """Liveness: the process serves requests. No database or thread pool is touched (see ``/readyz``)."""
    return Health(status="ok", database=ctx.engine.dialect.name, version=VERSION)


def _ping(engine: Engine) -> float:
    t0 = time.perf_counter()
    # Autocommit: no transaction, so (on SQLite) no wait for the write lock another writer holds.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SELECT 1"))
    return time.perf_counter() - t0


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(ctx: Ctx) -> JSONResponse:
    """Readiness: the database answers within 2 s and no background fitter lags more than 300 s; 503 (with
    ``Retry-After``) otherwise, with what is wrong in ``problems``."""
    problems: list[str] = []
    db_ms: float | None = None
    try:
        loop = asyncio.get_running_loop()
        took = await asyncio.wait_for(loop.run_in_executor(_probe, _ping, ctx.engine), READY_DB_TIMEOUT_S)
        db_ms = round(1000 * took, 1)
    except TimeoutError:
        problems.append(f"the database did not answer within {READY_DB_TIMEOUT_S:g} s")
    except Exception as exc:  # any driver error means "not ready"
        problems.append(f"database unavailable: {type(exc).__name__}")
    lags = {name: refitter.lag() for name, refitter in ctx.refitters().items()}
    for name, (pending, lag) in lags.items():
        if lag > READY_MAX_LAG_S:
            problems.append(f"the {name} fitter lags {lag:.0f} s ({pending} pending), more than {READY_MAX_LAG_S:g} s")
    out = Readiness(
        status="not_ready" if problems else "ready",
        database=ctx.engine.dialect.name,
        database_ms=db_ms,
        fitter_pending={name: pending for name, (pending, _) in lags.items()},
        fitter_lag_seconds={name: round(lag, 3) for name, (_, lag) in lags.items()},
        problems=problems,
        version=VERSION,
    )
    headers = {"Retry-After": str(RETRY_AFTER)} if problems else None
    return JSONResponse(out.model_dump(mode="json"), status_code=503 if problems else 200, headers=headers)
