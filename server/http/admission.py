"""Admission control: at most ``limit`` write requests in flight per process; one more gets a fast JSON 503.

Invariants: a write (POST, PUT, PATCH, DELETE under ``/api/``) is counted from before its body is read until its
answer is sent, so under saturation the service sheds at once (503 with ``Retry-After``, which the Reporter and the
worker honour, resending the same idempotent batch) instead of queueing without bound behind the database's write
lock; reads, ``/healthz``, ``/readyz`` and event streams are never counted or shed. ``limit`` 0 admits everything.
The counter lives on the event loop (no lock: ASGI calls never interleave between the check and the increment).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

#: Seconds a shed write waits before it is resent (short: the backlog it met drains in well under a second).
SHED_RETRY_AFTER = 1

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Admission:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.shed = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.limit <= 0
            or scope["type"] != "http"
            or scope.get("method") not in WRITE_METHODS
            or not scope.get("path", "").startswith("/api/")
        ):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            self.shed += 1
            await self._refuse(send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _refuse(self, send: Send) -> None:
        detail = f"the server is handling {self.limit} writes already; retry after {SHED_RETRY_AFTER} s"
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(SHED_RETRY_AFTER).encode()),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})
