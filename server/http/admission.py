"""Write admission: a write is authenticated from its head, its body read on a deadline, and only then does it
wait for a slot of its lane.

Invariants, for every POST, PUT, PATCH and DELETE under ``/api/``:

- Every write needs a token with the ``write`` scope (routes that need ``admin`` check that themselves): one that is
  missing, unknown, revoked or read-only is answered 401/403 from the head; its body is never read and it never
  takes a slot. The principal found is handed to the route (``scope["state"]["principal"]``), so the token is
  looked up once per request.
- Its body must arrive within ``body_timeout`` seconds plus one second per ``min_body_rate`` bytes, else 408 and the
  connection is closed; a body over the route's limit is 413. No slot is held while a body arrives, so idle or
  slow sockets, with or without a token, hold no slot.
- Heartbeats and status reports (a lease's renewal and its release) run in their own small lane and are never
  shed; every other write waits in order for one of ``limit`` fair slots (:class:`~server.http.slots.Slots`, one
  share per run, else per token) and is shed with 503 and ``Retry-After`` only when it could not be served within
  the slots' wait at the measured pace.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from server.http.limits import body_limit, replay_body
from server.http.slots import Held, Slots

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Writes that keep a lease alive or give it back: their own lane, never shed behind ingestion.
CONTROL_PATH = re.compile(r"^/api/v1/runs/[^/]+/(heartbeat|status)/?$")
RUN_PATH = re.compile(r"^/api/v1/runs/([0-9]+)(/|$)")
#: Slots of the control lane (heartbeats are one small row update each).
CONTROL_SLOTS = 2


@dataclass(frozen=True)
class Refusal:
    """An answer sent instead of the route's: JSON ``{"detail": ...}``; ``close``: the connection is closed after
    it (always when the body was not read: it is never waited for)."""

    status: int
    detail: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    close: bool = True


#: ``(bearer secret or None, scope needed) -> principal or Refusal``.
Authenticate = Callable[[str | None, str], Awaitable[Any]]


@dataclass(frozen=True)
class AdmissionPolicy:
    limit: int = 8
    queue_seconds: float = 1.0
    body_timeout: float = 10.0
    min_body_rate: int = 64 * 1024
    max_body_bytes: int = 8 * 1024 * 1024


class Admission:
    def __init__(self, app: ASGIApp, policy: AdmissionPolicy, authenticate: Authenticate) -> None:
        self.app = app
        self.policy = policy
        self.authenticate = authenticate
        limit = policy.limit
        self.writes = Slots(limit, per_key=max(1, limit // 4), wait=policy.queue_seconds) if limit > 0 else None
        self.control = Slots(CONTROL_SLOTS, wait=None, name="control") if limit > 0 else None
        self.timed_out = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") not in WRITE_METHODS or not path.startswith("/api/"):
            await self.app(scope, receive, send)
            return
        principal = await self.authenticate(_bearer(scope), "write")
        if isinstance(principal, Refusal):
            await refuse(send, principal)
            return
        scope.setdefault("state", {})["principal"] = principal
        body = await self._read_body(scope, receive, send)
        if body is None:
            return
        slots = self._lane(path)
        if slots is None:
            await self.app(scope, replay_body(body, receive), send)
            return
        key = _share_key(path, principal)
        if not await slots.acquire(key):
            wait = slots.retry_after()
            detail = f"the server is busy with {slots.limit} writes and a queue; retry after {wait} s"
            await refuse(send, Refusal(503, detail, ((b"retry-after", str(wait).encode()),), close=False))
            return
        held = Held(slots, key)
        try:
            await self.app(scope, replay_body(body, receive), send)
        finally:
            held.release()

    def _lane(self, path: str) -> Slots | None:
        return self.control if CONTROL_PATH.match(path) else self.writes

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None when it was refused (408, 413) or the client went away."""
        policy = self.policy
        limit = body_limit(scope.get("path", ""), policy.max_body_bytes)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await refuse(send, Refusal(413, f"body of {declared} bytes exceeds the limit of {limit} bytes"))
            return None
        started = time.monotonic()
        chunks: list[bytes] = []
        size = 0
        while True:
            allowed = policy.body_timeout + max(declared or 0, size) / policy.min_body_rate
            try:
                message = await asyncio.wait_for(receive(), timeout=started + allowed - time.monotonic())
            except TimeoutError:
                self.timed_out += 1
                detail = (
                    f"the request body did not arrive within {allowed:.0f} s ({size} bytes received); send it "
                    f"at once or at {policy.min_body_rate} bytes/s at least"
                )
                await refuse(send, Refusal(408, detail))
                return None
            if message["type"] != "http.request":
                return None  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await refuse(send, Refusal(413, f"body of more than {limit} bytes exceeds the limit of {limit} bytes"))
                return None
            if not message.get("more_body", False):
                return b"".join(chunks)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, secret = bytes(value).decode("latin-1").partition(" ")
            token: str = secret.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def _share_key(path: str, principal: Any) -> str:
    """Fair shares: one per run for a run's writes, else one per token."""
    run = RUN_PATH.match(path)
    return f"run:{run.group(1)}" if run else f"token:{getattr(principal, 'name', '')!s}"


async def refuse(send: Send, refusal: Refusal) -> None:
    """Send ``refusal`` as JSON."""
    body = json.dumps({"detail": refusal.detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.close:
        headers.append((b"connection", b"close"))
    headers.extend(refusal.headers)
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
