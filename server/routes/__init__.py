"""HTTP routes, one thin module per resource, and the one router table: every resource under ``/api/v1`` (applied
here, once, with the token errors every such endpoint documents); ``/healthz``, ``/readyz`` and the API docs at the
root."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from server.routes import alerts, apidocs, dashboard, events, experiments, health, jobs, runs, tokens, tracking
from server.routes.errors import AUTH

API_PREFIX = "/api/v1"
#: In order: ``tracking`` before ``experiments`` (``/experiments/tracking`` before ``/experiments/{id}``).
API_ROUTERS = (tracking, experiments, events, runs, jobs, tokens, dashboard, alerts)


def include_routes(app: FastAPI) -> None:
    api = APIRouter(prefix=API_PREFIX, responses=AUTH)
    for module in API_ROUTERS:
        api.include_router(module.router)
    app.include_router(health.router)
    app.include_router(api)
    app.include_router(apidocs.router)
