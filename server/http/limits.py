"""ASGI middleware that refuses request bodies over ``max_bytes`` with 413, whether or not Content-Length is sent.

A run's metrics may reach ``max_body_bytes``; every other body is at most :data:`OTHER_MAX_BYTES` (1 MiB).

With a Content-Length the header decides at once; without one (chunked) the body is read up to the limit first
and then replayed to the app, so the app never sees an oversized body.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Bodies of every other endpoint than a run's metrics are at most this many bytes (grid documents included): the
#: framework parses JSON bodies on the event loop, so their size bounds how long one request can hold it.
OTHER_MAX_BYTES = 1024 * 1024
#: The one endpoint whose bodies may reach ``max_body_bytes`` (it parses them in a worker thread itself).
_LARGE = re.compile(r"^/api/v1/runs/[^/]+/metrics/?$")


def body_limit(path: str, max_bytes: int) -> int:
    """The largest body ``path`` accepts: ``max_bytes`` for a run's metrics, :data:`OTHER_MAX_BYTES` otherwise."""
    return max_bytes if _LARGE.match(path) else min(max_bytes, OTHER_MAX_BYTES)


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, other_max_bytes: int = OTHER_MAX_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.other_max_bytes = min(max_bytes, other_max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_bytes if _LARGE.match(scope.get("path", "")) else self.other_max_bytes
        await self._limited(scope, receive, send, limit)

    async def _refuse(self, send: Send, size: str, limit: int) -> None:
        body = json.dumps({"detail": f"body of {size} bytes exceeds the limit of {limit} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _limited(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > limit:
                await self._refuse(send, declared.decode(), limit)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await self._refuse(send, f"more than {limit}", limit)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, replay_body(b"".join(chunks), receive), send)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app ``body`` (already read) once, then what the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


#: Longest path plus query string, and largest total of header names and values, that the service reads.
MAX_URL_BYTES = 8 * 1024
MAX_HEADER_BYTES = 16 * 1024


class HeadLimit:
    """A JSON 414 for a URL (path and query) over :data:`MAX_URL_BYTES` and a 431 for headers over
    :data:`MAX_HEADER_BYTES`, whatever the server in front let through (uvicorn's h11 refuses larger heads itself:
    :mod:`server.http.http11`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            url = len(scope.get("raw_path") or scope.get("path", "").encode()) + len(scope.get("query_string", b""))
            headers = sum(len(k) + len(v) for k, v in scope.get("headers", []))
            if url > MAX_URL_BYTES or headers > MAX_HEADER_BYTES:
                if scope["type"] == "http":
                    status = 414 if url > MAX_URL_BYTES else 431
                    detail = (
                        f"the URL is longer than {MAX_URL_BYTES} bytes"
                        if status == 414
                        else f"the headers are longer than {MAX_HEADER_BYTES} bytes"
                    )
                    body = json.dumps({"detail": detail}).encode()
                    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                    await send({"type": "http.response.start", "status": status, "headers": start})
                    await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
