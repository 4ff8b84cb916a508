"""FastAPI dependencies: the service context, a database session, and token authentication by scope.

Invariant: every write endpoint depends on :func:`require_write` or :func:`require_admin`; reads depend on
:func:`require_read`, which admits anonymous callers only when the server was started with ``open_reads``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from server.lifecycle.tokens import Scope, implied_scopes, lookup_active
from server.runtime.context import ServiceContext
from server.store.db import read_session

CHALLENGE = {"WWW-Authenticate": "Bearer"}
bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer srl_...`")


@dataclass(frozen=True)
class Principal:
    name: str
    scopes: frozenset[Scope]
    anonymous: bool = False


async def get_ctx(request: Request) -> ServiceContext:
    """Async on purpose: no I/O, so FastAPI resolves it without a threadpool hop."""
    ctx: ServiceContext = request.app.state.ctx
    return ctx


Ctx = Annotated[ServiceContext, Depends(get_ctx)]


def get_session(ctx: Ctx, request: Request) -> Iterator[Session]:
    """A session whose transaction commits before the response is sent, and rolls back if the endpoint raises.

    Callables in ``session.info["after_commit"]`` run once the commit succeeded (wake SSE streams, queue refits).
    A GET or HEAD only reads: its transaction is a read-only one (on SQLite it never waits for the write lock).
    """
    if request.method in ("GET", "HEAD"):
        with ctx.sessions() as session:
            yield session
        return
    with ctx.sessions.begin() as session:
        yield session
    for hook in session.info.get("after_commit", ()):
        hook()


DbSession = Annotated[Session, Depends(get_session, scope="function")]


def get_read_session(ctx: Ctx) -> Iterator[Session]:
    """Reads only: no transaction or SQLite write lock, even while a slow read (a verdict fitting every run) runs."""
    with read_session(ctx.engine) as session:
        yield session


ReadSession = Annotated[Session, Depends(get_read_session, scope="function")]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _authenticate(ctx: ServiceContext, creds: HTTPAuthorizationCredentials | None, scope: Scope) -> Principal:
    if creds is None:
        if scope == "read" and ctx.settings.open_reads:
            return Principal("anonymous", frozenset({"read"}), anonymous=True)
        raise HTTPException(401, "missing API token: send 'Authorization: Bearer <token>'", CHALLENGE)
    info = lookup_active(ctx.engine, creds.credentials)
    if info is None:
        raise HTTPException(401, "invalid or revoked API token", CHALLENGE)
    granted = implied_scopes(info.scopes)
    name = info.name
    if scope not in granted:
        raise HTTPException(403, f"token {name!r} lacks the {scope!r} scope (it has: {sorted(granted)})")
    return Principal(name, frozenset(granted))


def require_read(ctx: Ctx, creds: Credentials) -> Principal:
    return _authenticate(ctx, creds, "read")


def require_write(ctx: Ctx, creds: Credentials) -> Principal:
    return _authenticate(ctx, creds, "write")


def require_admin(ctx: Ctx, creds: Credentials) -> Principal:
    return _authenticate(ctx, creds, "admin")


Reader = Annotated[Principal, Depends(require_read)]
Writer = Annotated[Principal, Depends(require_write)]
Admin = Annotated[Principal, Depends(require_admin)]
