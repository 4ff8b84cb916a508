"""The composition root of the service: the REST API (``server.app.create_api``) plus the dashboard's pages
(``web.router``). Only this module knows both layers; server never imports web."""

from __future__ import annotations

from fastapi import FastAPI

from server.app import create_api
from server.runtime.context import ServiceContext
from server.store.settings import Settings
from web.errors import install as install_error_pages
from web.router import router as web_pages


def create_app(settings: Settings | None = None, ctx: ServiceContext | None = None) -> FastAPI:
    """The whole service (API and pages); the database must already be migrated (``scalerl db upgrade``)."""
    app = create_api(settings, ctx)
    app.include_router(web_pages)
    install_error_pages(app)
    return app
