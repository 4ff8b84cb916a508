"""Database failures as answers a client can act on: a JSON 503 with ``Retry-After``, never a plain-text 500."""

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


async def database_unavailable(_: Request, exc: Exception) -> JSONResponse:
    """OperationalError/InterfaceError (and lost connections): 503 with Retry-After; workers retry 5xx."""
    if not is_unavailable(exc):
        raise exc
    busy = "locked" in str(getattr(exc, "orig", exc))
    detail = (
        "the database is busy (another writer holds the lock); retry shortly"
        if busy
        else f"the database is unavailable ({type(getattr(exc, 'orig', exc)).__name__}); retry shortly"
    )
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})


class Overloaded(Exception):
    """The server sheds this request instead of queueing it without bound (HTTP 503 with ``Retry-After``)."""


async def overloaded(_: Request, exc: Exception) -> JSONResponse:
    """:class:`Overloaded`: a fast JSON 503 with ``Retry-After``; the Reporter and the worker resend after it."""
    return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})
