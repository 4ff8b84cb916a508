"""ASGI middleware that answers a request whose ``Host`` header names no allowed host with a JSON 400.

A service on 127.0.0.1 can be reached by a web page through DNS rebinding (a name that first resolves to the
attacker's server, then to 127.0.0.1): the browser then sends the attacker's name as ``Host``. Checking ``Host``
against the names the service is really reached by closes that door. Entries are exact host names or addresses
(case-insensitive, without port), ``*.example.com`` (any subdomain), or ``*`` (any host: no check).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send


def host_of(value: str) -> str:
    """The host part of a Host header: no port, no IPv6 brackets, lower case, no trailing dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


class AllowedHosts:
    def __init__(self, app: ASGIApp, allowed: tuple[str, ...] | list[str]) -> None:
        self.app = app
        self.any = "*" in allowed
        self.exact = {host_of(h) for h in allowed if not h.startswith("*")}
        self.suffixes = tuple(h.lower()[1:] for h in allowed if h.startswith("*.") and len(h) > 2)

    def allows(self, host: str) -> bool:
        if self.any:
            return True
        name = host_of(host)
        return name in self.exact or (bool(name) and name.endswith(self.suffixes) and bool(self.suffixes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.any:
            await self.app(scope, receive, send)
            return
        host = ""
        for key, value in scope.get("headers", []):
            if key == b"host":
                host = value.decode("latin-1")
                break
        if self.allows(host):
            await self.app(scope, receive, send)
            return
        shown = host[:100]
        detail = f"Host header {shown!r} is not an allowed host of this server (the allowed_hosts setting)"
        body = json.dumps({"detail": detail}).encode()
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
