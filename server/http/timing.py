"""ASGI middleware adding ``Server-Timing: app;dur=<ms>`` (request received -> response started) to every answer,
so clients and benchmarks can tell time spent in the service from time spent on the network or in queues."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ServerTiming:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000
                message["headers"] = [*message.get("headers", []), (b"server-timing", f"app;dur={ms:.2f}".encode())]
            await send(message)

        await self.app(scope, receive, timed_send)
