"""The REST API application: routes, error mapping, body-size limit, and background work in the lifespan.

The dashboard's pages are added by the composition root (``scalerl.app.create_app``): server never imports web.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from server.alerts.delivery import deliver_due
from server.assess.background import reap_once
from server.assess.point_fit import stale_point_fits
from server.base.version import VERSION
from server.http.admission import Admission, AdmissionPolicy
from server.http.hosts import AllowedHosts
from server.http.http11 import limited_h11
from server.http.limits import BodyLimit, HeadLimit
from server.http.timing import ServerTiming
from server.intake.schemas import MetricsBatchIn
from server.lifecycle.grid import GridDocument
from server.routes import errors, include_routes
from server.routes.deps import admission_authenticator
from server.runtime.context import ServiceContext
from server.store.db import read_session
from server.store.settings import Settings

log = logging.getLogger("scalerl.server")

DESCRIPTION = """Experiments (grids of RL recipes), runs, metrics and live forecasts of each run's
compute-performance sigmoid. Every endpoint except `/healthz` and `/readyz` needs `Authorization: Bearer <token>`
(reads are open only on a server started with `open_reads` on localhost). See docs/api.md."""


def create_api(settings: Settings | None = None, ctx: ServiceContext | None = None) -> FastAPI:
    """Build the REST API; the database must already be migrated (``scalerl db upgrade``)."""
    context = ctx or ServiceContext.build(settings or Settings())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        context.start()

        async def reaper() -> None:
            settings = context.settings
            while True:
                await asyncio.sleep(settings.reaper_interval_seconds)
                try:
                    await run_in_threadpool(
                        reap_once, context.sessions, context.notifier, settings.silent_after_heartbeats
                    )
                except Exception:  # a failed sweep (e.g. database restarting) is retried next time
                    log.exception("lease reaper failed")
                if settings.deliver_alerts:
                    try:
                        await run_in_threadpool(deliver_due, context.sessions)
                    except Exception:  # delivery is retried next sweep; its rows say what failed
                        log.exception("alert delivery failed")

        task = asyncio.create_task(reaper())
        sweep = asyncio.create_task(run_in_threadpool(refit_stale_runs, context))
        try:
            yield
        finally:
            task.cancel()
            sweep.cancel()
            context.close()

    app = FastAPI(
        title="scalerl",
        version=VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        separate_input_output_schemas=False,
        docs_url=None,  # served by server.routes.apidocs from local assets, under a CSP
        redoc_url=None,
        responses=errors.COMMON,
    )
    app.state.ctx = context

    settings = context.settings
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    policy = AdmissionPolicy(
        limit=settings.write_slots,
        queue_seconds=settings.write_queue_seconds,
        body_timeout=settings.body_timeout_seconds,
        min_body_rate=settings.min_body_rate,
        max_body_bytes=settings.max_body_bytes,
    )
    # Writes are authenticated from their head and read on a deadline before they take a slot.
    app.add_middleware(Admission, policy=policy, authenticate=admission_authenticator(context))
    app.add_middleware(ServerTiming)
    app.add_middleware(AllowedHosts, allowed=context.settings.trusted_hosts)
    app.add_middleware(HeadLimit)  # outermost: a URL or headers over the limits are refused first (414/431)

    errors.install(app)
    include_routes(app)
    _document_grid_schema(app)
    return app


def serve_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's keyword arguments for this service (``uvicorn.run(app, **serve_options(settings))``): the HTTP
    protocol with JSON answers to over-long heads and a deadline for each head, and the idle keep-alive."""
    return {
        "http": limited_h11(settings.header_timeout_seconds),
        "timeout_keep_alive": settings.keep_alive_seconds,
        "timeout_graceful_shutdown": 3,
    }


def refit_stale_runs(ctx: ServiceContext) -> int:
    """At start: queue the point fit of every run whose stored evaluations are newer than its fit (the server died
    between a batch's commit and its refit; the point refitter then refreshes its experiment); returns how many.
    Failures are logged, never raised."""
    try:
        with read_session(ctx.engine) as session:
            stale = stale_point_fits(session)
        for run_id in stale:
            ctx.refit_run_soon(run_id)
        if stale:
            log.info("queued the refit of %d runs whose points were newer than their fit", len(stale))
        return len(stale)
    except Exception:  # e.g. the database is not reachable yet: the next batch of each run refits it
        log.exception("refitting stale runs at start failed")
        return 0


def _document_grid_schema(app: FastAPI) -> None:
    """Add the bodies read from the raw request (GridDocument, MetricsBatchIn) to the OpenAPI components."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = build()
            schema = GridDocument.model_json_schema(ref_template="#/components/schemas/{model}")
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            components.update(schema.pop("$defs", {}))
            components["GridDocument"] = schema
            # The metrics batch is also read from the raw body (fast JSON validation, per-point errors).
            batch = MetricsBatchIn.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(batch.pop("$defs", {}))
            components["MetricsBatchIn"] = batch
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
