"""Database failures as answers a client can act on: a JSON 503 with ``Retry-After``, never a plain-text 500.

Invariant: the detail names the cause a client or operator acts on: busy (retry), disk full (free space, then
retry: the failed transaction stored nothing and was rolled back, so a resend is complete), or unavailable.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

#: Seconds a client should wait before retrying a request the database could not serve.
RETRY_AFTER = 2


def is_unavailable(exc: BaseException) -> bool:
    """True for a database that cannot serve now: down, restarting, connection lost, SQLite busy past its timeout."""
    return isinstance(exc, (OperationalError, InterfaceError)) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    )


#: SQLite's primary result code SQLITE_FULL ("database or disk is full"; extended codes keep it in the low byte).
_SQLITE_FULL = 13
#: PostgreSQL's SQLSTATE disk_full (psycopg's ``DiskFull``: "could not extend file ...: No space left on device").
_PG_DISK_FULL = "53100"

#: The answer's detail when the database could not grow.
DISK_FULL = (
    "disk full: the database could not grow (its disk, or its size limit, is full), so nothing of this request "
    "was stored; free space and retry"
)


def is_disk_full(exc: BaseException) -> bool:
    """True for a failure because the database's disk (or SQLite's ``max_page_count``) is full: SQLITE_FULL or
    SQLSTATE 53100, whether ``exc`` is the driver's error or SQLAlchemy's wrapper of it."""
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) == _PG_DISK_FULL:
        return True
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
        return True
    return "database or disk is full" in str(orig)


def unavailable_detail(exc: BaseException) -> str:
    """What a 503 for the database error ``exc`` tells the client: disk full, busy or unavailable."""
    orig = getattr(exc, "orig", None) or exc
    if is_disk_full(exc):
        return DISK_FULL
    if "locked" in str(orig):
        return "the database is busy (another writer holds the lock); retry shortly"
    return f"the database is unavailable ({type(orig).__name__}); retry shortly"


async def database_unavailable(_: Request, exc: Exception) -> JSONResponse:
    """OperationalError/InterfaceError (and lost connections): 503 with Retry-After; workers retry 5xx."""
    if not is_unavailable(exc):
        raise exc
    detail = unavailable_detail(exc)
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})


class Overloaded(Exception):
    """The server sheds this request instead of queueing it without bound (HTTP 503 with ``Retry-After``)."""


async def overloaded(_: Request, exc: Exception) -> JSONResponse:
    """:class:`Overloaded`: a fast JSON 503 with ``Retry-After``; the Reporter and the worker resend after it."""
    return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})
