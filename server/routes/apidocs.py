"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) served entirely by this server: the assets come from the
``fastapi-offline`` package (Swagger UI and ReDoc bundles, shipped in its wheel), so the pages work with no
network (an air-gapped cluster) and load nothing from a public CDN. Each page sends a Content-Security-Policy that
allows scripts, styles, fonts and connections from this server only (the start-up script is a file, not inline).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response

HERE = Path(__file__).resolve().parent
ASSETS = "/docs-assets"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'"
)
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
MEDIA = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}

SWAGGER_INIT = """"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""

SWAGGER_PAGE = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>scalerl API · Swagger UI</title>
  <link rel="icon" type="image/png" href="{ASSETS}/favicon.png">
  <link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{ASSETS}/swagger-ui-bundle.js"></script>
  <script src="{ASSETS}/swagger-init.js"></script>
</body>
</html>
"""

REDOC_PAGE = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>scalerl API · ReDoc</title>
  <link rel="icon" type="image/png" href="{ASSETS}/favicon.png">
</head>
<body>
  <redoc spec-url="/openapi.json"></redoc>
  <script src="{ASSETS}/redoc.standalone.js"></script>
</body>
</html>
"""

router = APIRouter(include_in_schema=False)


@cache
def _assets() -> dict[str, Path]:
    import fastapi_offline

    folder = Path(fastapi_offline.__file__).resolve().parent / "static"
    names = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
    return {name: folder / name for name in names if (folder / name).is_file()}


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return HTMLResponse(SWAGGER_PAGE, headers=HEADERS)


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return HTMLResponse(REDOC_PAGE, headers=HEADERS)


@router.get(ASSETS + "/{name}")
def asset(name: str) -> Response:
    cache_control = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    if name == "swagger-init.js":
        return Response(SWAGGER_INIT, media_type="text/javascript", headers=cache_control)
    path = _assets().get(name)
    if path is None:
        raise HTTPException(404, f"no documentation asset {name!r}")
    return FileResponse(path, media_type=MEDIA[path.suffix], headers=cache_control)
