"""``GET /healthz``: the service is up and its database answers."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy import text

from server.deps import Ctx
from server.errors import RETRY_AFTER
from server.schemas import ErrorOut, Health
from server.version import VERSION

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": ErrorOut}})
def healthz(ctx: Ctx) -> Health:
    try:
        # Autocommit: no transaction, so (on SQLite) no wait for the write lock another writer holds.
        with ctx.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not healthy"
        raise HTTPException(
            503, f"database unavailable: {type(exc).__name__}", headers={"Retry-After": str(RETRY_AFTER)}
        ) from None
    return Health(status="ok", database=ctx.engine.dialect.name, version=VERSION)
