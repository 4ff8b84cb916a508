"""FastAPI dependencies: the service context, a database session, and token authentication by scope.

Invariant: every write endpoint depends on :func:`require_write` or :func:`require_admin`; reads depend on
:func:`require_read`, which admits anonymous callers only when the server was started with ``open_reads``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from server.http.admission import Refusal
from server.http.errors import RETRY_AFTER, is_unavailable, unavailable_detail
from server.lifecycle.tokens import Scope, implied_scopes
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


@dataclass(frozen=True)
class Denied:
    status: int
    detail: str

    @property
    def headers(self) -> dict[str, str] | None:
        return CHALLENGE if self.status == 401 else None


async def principal_for(ctx: ServiceContext, secret: str | None, scope: Scope) -> Principal | Denied:
    """Who presents ``secret`` and whether it grants ``scope``: the one authentication rule, shared by the
    routes' dependencies and write admission (:func:`admission_authenticator`)."""
    if secret is None:
        if scope == "read" and ctx.settings.open_reads:
            return Principal("anonymous", frozenset({"read"}), anonymous=True)
        return Denied(401, "missing API token: send 'Authorization: Bearer <token>'")
    info = await ctx.tokens.lookup(secret)
    if info is None:
        return Denied(401, "invalid or revoked API token")
    granted = implied_scopes(info.scopes)
    if scope not in granted:
        return Denied(403, f"token {info.name!r} lacks the {scope!r} scope (it has: {sorted(granted)})")
    return Principal(info.name, frozenset(granted))


async def _authenticate(
    ctx: ServiceContext, request: Request, creds: HTTPAuthorizationCredentials | None, scope: Scope
) -> Principal:
    admitted = request.scope.get("state", {}).get("principal")
    if isinstance(admitted, Principal) and scope in admitted.scopes:
        return admitted  # write admission already looked this token up
    found = await principal_for(ctx, creds.credentials if creds is not None else None, scope)
    if isinstance(found, Denied):
        raise HTTPException(found.status, found.detail, found.headers)
    return found


def admission_authenticator(ctx: ServiceContext) -> Callable[[str | None, str], Awaitable[Principal | Refusal]]:
    """``principal_for`` as write admission asks it: a :class:`Refusal` instead of an exception."""

    async def authenticate(secret: str | None, scope: str) -> Principal | Refusal:
        try:
            found = await principal_for(ctx, secret, cast(Scope, scope))
        except Exception as exc:  # outside the app's error handlers: answer as they would
            if not is_unavailable(exc):
                raise
            retry = ((b"retry-after", str(RETRY_AFTER).encode()),)
            return Refusal(503, unavailable_detail(exc), retry)
        if isinstance(found, Denied):
            headers = tuple((k.lower().encode(), v.encode()) for k, v in (found.headers or {}).items())
            return Refusal(found.status, found.detail, headers)
        return found

    return authenticate


async def require_read(ctx: Ctx, request: Request, creds: Credentials) -> Principal:
    return await _authenticate(ctx, request, creds, "read")


async def require_write(ctx: Ctx, request: Request, creds: Credentials) -> Principal:
    return await _authenticate(ctx, request, creds, "write")


async def require_admin(ctx: Ctx, request: Request, creds: Credentials) -> Principal:
    return await _authenticate(ctx, request, creds, "admin")


Reader = Annotated[Principal, Depends(require_read)]
Writer = Annotated[Principal, Depends(require_write)]
Admin = Annotated[Principal, Depends(require_admin)]
