"""The dashboard's pages and static files.

Pages are Jinja templates that hold layout only, never data: every number on them is fetched by the browser from
the REST API (``/api/v1/...``) with the user's token, and kept current by the experiment's server-sent events. So
a page can be served to anyone, and what it shows is exactly what the token may read. Plotly.js is served from the
installed ``plotly`` package (no CDN).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from server.base.types import MAX_ID
from web.forms import form_context
from web.status_rules import STATUS_RULES

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.globals["status_rules"] = STATUS_RULES  # base.html renders them into every page

#: Pages run only their own scripts; data comes from this origin only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
MEDIA = {".js": "text/javascript", ".css": "text/css"}

router = APIRouter(include_in_schema=False)


@cache
def plotly_js() -> Path:
    """Plotly.js as shipped inside the ``plotly`` Python package."""
    import plotly

    path = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise RuntimeError(f"plotly.min.js is missing from the installed plotly package ({path})")
    return path


def _page(request: Request, template: str, title: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        template,
        {"title": title, "active": template.split(".")[0], **context},
        status_code=status_code,
        headers=HEADERS,
    )


def not_found_page(request: Request) -> HTMLResponse:
    """The HTML 404 for a browser asking for a page that does not exist."""
    return _page(request, "404.html", "Page not found", status_code=404, path=request.url.path)


def _object_page(request: Request, value: str, template: str, title: str, key: str) -> HTMLResponse:
    """An object's page, its id (``key``) from the path: a positive integer the API can hold, else the 404 page."""
    number = int(value) if value.isdigit() and len(value) <= 19 else 0
    if not 1 <= number <= MAX_ID:
        return not_found_page(request)
    return _page(request, template, title, **{key: number})


@router.get("/", response_class=HTMLResponse)
def experiments_page(request: Request) -> HTMLResponse:
    return _page(request, "experiments.html", "Experiments")


@router.get("/experiments/new", response_class=HTMLResponse)
def new_experiment_page(request: Request) -> HTMLResponse:
    return _page(request, "new_experiment.html", "New experiment", **form_context())


@router.get("/experiments/{experiment_id}", response_class=HTMLResponse)
def experiment_page(request: Request, experiment_id: str) -> HTMLResponse:
    return _object_page(request, experiment_id, "experiment.html", "Experiment", "experiment_id")


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    return _object_page(request, run_id, "run.html", "Run", "run_id")


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request) -> HTMLResponse:
    """Where pages send a browser whose API calls answer 401: says where a token comes from."""
    return _page(request, "signin.html", "Sign in")


@router.get("/alerts", response_class=HTMLResponse)
def alerts_page(request: Request) -> HTMLResponse:
    from server.alerts.raising import ALERT_TYPES

    return _page(request, "alerts.html", "Alerts", alert_types=list(ALERT_TYPES))


@router.get("/settings", response_class=HTMLResponse)
def settings_page(request: Request) -> HTMLResponse:
    return _page(request, "settings.html", "Settings")


@router.get("/static/plotly.min.js")
def plotly_static() -> Response:
    return FileResponse(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"})


@cache
def _static_files() -> dict[str, Path]:
    return {p.name: p for p in STATIC.iterdir() if p.suffix in MEDIA}


@router.get("/static/{name}")
def static(name: str) -> Response:
    path = _static_files().get(name)
    if path is None:
        raise HTTPException(404, f"no static file {name!r}")
    return FileResponse(path, media_type=MEDIA[path.suffix], headers={"Cache-Control": "no-cache"})
