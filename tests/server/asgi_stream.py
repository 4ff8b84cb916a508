"""An HTTP GET to an ASGI app on the test's own event loop, its answer recorded message by message as it comes.

For event streams without sockets: many open streams are cheap, and a client that stops reading is a ``send`` that
does not return (exactly what a full socket does to the server).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message


class StreamClient:
    """One request; ``status``, ``chunks`` (arrival time, body bytes) and ``ended`` fill in as the app answers.

    ``pace``: seconds each body message takes to read (a client reading at its own speed); ``reading`` cleared: the
    client stops reading (the app's next send waits until it is set again).
    """

    def __init__(self, app: ASGIApp, url: str, headers: dict[str, str], pace: float = 0.0) -> None:
        self.app, self.url, self.headers, self.pace = app, url, headers, pace
        self.status: int | None = None
        self.started = asyncio.Event()
        self.ended = asyncio.Event()
        self.ended_at = 0.0
        self.reading = asyncio.Event()
        self.reading.set()
        self.chunks: list[tuple[float, bytes]] = []
        self._gone = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> StreamClient:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def opened(self, timeout: float = 10.0) -> int:
        """The answer's status, once its head was sent."""
        await asyncio.wait_for(self.started.wait(), timeout)
        assert self.status is not None
        return self.status

    async def close(self) -> None:
        """The client goes away; returns when the app has finished the request."""
        self._gone.set()
        self.reading.set()
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), 10)

    @property
    def body(self) -> bytes:
        return b"".join(c for _, c in self.chunks)

    async def _run(self) -> None:
        parts = urlsplit(self.url)
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": [(b"host", b"testserver")] + [(k.lower().encode(), v.encode()) for k, v in self.headers.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
            "state": {},
        }
        try:
            await self.app(scope, self._receive, self._send)
        finally:
            self.ended_at = time.perf_counter()
            self.ended.set()
            self.started.set()

    async def _receive(self) -> Message:
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.started.set()
            return
        await self.reading.wait()
        if self._gone.is_set():
            raise OSError("the client went away")
        if message.get("body"):
            self.chunks.append((time.perf_counter(), message["body"]))
            if self.pace:
                await asyncio.sleep(self.pace)
