"""A loopback HTTP service that answers as a test says: a flaky one, a busy one, a recorder of what was posted.

``local_service(answer)`` serves GET and POST on 127.0.0.1 (a port the OS picks) from a thread until its block
ends; every request is read whole (its ``Content-Length``) and handed to ``answer``, whose ``Reply`` is sent with
its own ``Content-Length``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


def json_reply(status: int, payload: object, headers: Mapping[str, str] | None = None) -> Reply:
    """``payload`` as a JSON body with ``Content-Type: application/json`` (and ``headers``)."""
    return Reply(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})


@contextmanager
def local_service(answer: Callable[[Request], Reply]) -> Iterator[str]:
    """Serve ``answer`` until the block ends; yields the base URL (``http://127.0.0.1:PORT``, no trailing slash)."""

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            reply = answer(Request(self.command, self.path, dict(self.headers.items()), body))
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
