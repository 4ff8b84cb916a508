"""HTML error pages for browsers: an unknown page gets the dashboard's 404 page instead of the API's raw JSON.

Only 404s of paths outside the API (``/api/``, ``/healthz``, ``/openapi.json``, ``/static/``) asked for by a browser
(``Accept`` names ``text/html``) are answered with HTML; everything else keeps FastAPI's JSON answer.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from web.router import not_found_page

API_PREFIXES = ("/api/", "/healthz", "/openapi.json", "/static/", "/docs", "/redoc")


def wants_page(request: Request) -> bool:
    path = request.url.path
    return not path.startswith(API_PREFIXES) and "text/html" in request.headers.get("accept", "")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)  # registered for that class only
    if exc.status_code == 404 and wants_page(request):
        return not_found_page(request)
    return await http_exception_handler(request, exc)


def install(app: FastAPI) -> None:
    """Answer browsers' unknown pages with HTML (call once, on the composed app)."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
