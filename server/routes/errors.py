"""The one error table of the REST API: which exception answers with which status, and the error answers the
OpenAPI document shows. Every error body is ``{"detail": ...}`` (:class:`server.base.schemas.ErrorOut`).

Invariants: a route raises a domain exception (``NotFound``, ``Conflict``, ...) and never builds an error response
itself; a validation error's answer never echoes the whole input (it is clipped and JSON-safe); a database that is
down or busy answers a JSON 503 with ``Retry-After`` (:mod:`server.http.errors`), never a plain-text 500.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError

from server.base.jsonsafe import json_safe
from server.base.safeinput import UnsafeInput, clip_errors, clip_problems
from server.base.schemas import ErrorOut
from server.http.errors import Overloaded, database_unavailable, overloaded
from server.lifecycle.grid import GridDocumentError
from server.lifecycle.runs import Conflict, NotFound
from server.lifecycle.status import TransitionError

Responses = dict[int | str, dict[str, Any]]


def doc(status: int, description: str) -> Responses:
    return {status: {"model": ErrorOut, "description": description}}


#: Every endpoint: what a request can get wrong before a route runs.
COMMON: Responses = {
    **doc(400, "Malformed request body (not decodable)"),
    **doc(413, "Request body over the server's max_body_bytes"),
    **doc(414, "URL over 8 KiB (server.http.limits.HeadLimit)"),
    **doc(431, "Request headers over 16 KiB (server.http.limits.HeadLimit)"),
    **doc(422, "Invalid input: what was wrong and what is allowed"),
}
#: Every endpoint under ``/api/v1``.
AUTH: Responses = {**doc(401, "Missing or invalid token"), **doc(403, "Token lacks the scope")}
ADMIN: Responses = doc(403, "Token lacks the admin scope")
CONFLICT: Responses = doc(409, "Not allowed in the run's current status")


def not_found(what: str) -> Responses:
    """The 404 of a route that looks ``what`` up by id."""
    return doc(404, f"No such {what}")


#: Domain exceptions and the status each answers with; the answer's detail is the exception's message.
STATUS: dict[type[Exception], int] = {NotFound: 404, Conflict: 409, TransitionError: 409, UnsafeInput: 422}


def error(status: int, detail: object) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def install(app: FastAPI) -> None:
    """Register the table's handlers on ``app``."""

    async def invalid_request(_: Request, exc: Exception) -> JSONResponse:
        # The default handler echoes the whole input (a 500 when it holds NaN/inf; megabytes when it is big).
        assert isinstance(exc, RequestValidationError)
        return error(422, json_safe(jsonable_encoder(clip_errors(exc.errors()))))

    async def bad_document(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GridDocumentError)
        return error(422, clip_problems(exc.problems))

    async def integrity(_: Request, exc: Exception) -> JSONResponse:
        return error(409, "conflicts with stored data (a concurrent request created the same object)")

    async def by_table(_: Request, exc: Exception) -> JSONResponse:
        status = next(code for kind, code in STATUS.items() if isinstance(exc, kind))
        return error(status, str(exc))

    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(GridDocumentError, bad_document)
    app.add_exception_handler(IntegrityError, integrity)
    for kind in STATUS:
        app.add_exception_handler(kind, by_table)
    app.add_exception_handler(OperationalError, database_unavailable)
    app.add_exception_handler(InterfaceError, database_unavailable)
    app.add_exception_handler(Overloaded, overloaded)
