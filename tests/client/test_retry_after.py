"""Issue 14: a JSON 503 with ``Retry-After`` (the database restarting) sets how long every client waits, capped
by its own ``max_backoff``: the engine's HttpReporter (against a tiny local server), scalerl.client's Client and
Reporter, and the worker's ServerClient (mocked transports)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from rl_core.engine.sinks import HttpReporter
from scalerl.client import Client
from scalerl.client.api import ServiceUnavailable, retry_after
from scalerl.client.reporter import Reporter
from worker.client import ServerClient, Unavailable
from worker.executor import Backoff


@contextmanager
def busy_then_ok(busy: int, header: str | None) -> Iterator[str]:
    """A local server answering ``busy`` 503s (with ``Retry-After: header``) and then 200."""
    left = {"n": busy}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            busy_now = left["n"] > 0
            left["n"] -= 1
            body = b'{"detail": "database unavailable"}' if busy_now else b'{"action": "continue"}'
            self.send_response(503 if busy_now else 200)
            if busy_now and header is not None:
                self.send_header("Retry-After", header)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("header", "expected"), [("7", [7.0, 7.0]), ("600", [30.0, 30.0]), (None, [0.5, 1.0])])
def test_http_reporter_waits_as_long_as_retry_after_says_capped(header: str | None, expected: list[float]) -> None:
    slept: list[float] = []
    with busy_then_ok(2, header) as url:
        reporter = HttpReporter(url, 1, "t", backoff=0.5, max_backoff=30.0, sleep=slept.append)
        assert reporter._request("/api/v1/runs/1/metrics", {"points": []}) == {"action": "continue"}
    assert slept == expected


def test_retry_after_parses_seconds_and_http_dates() -> None:
    assert retry_after("5") == 5.0 and retry_after(" 2.5 ") == 2.5 and retry_after("-3") == 0.0
    assert retry_after(None) is None and retry_after("soon") is None and retry_after("nan") is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=40), usegmt=True)
    assert 35 <= (retry_after(later) or 0) <= 41


def _busy(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503, json={"detail": "database unavailable"}, headers={"Retry-After": "9"})


def test_client_and_reporter_honour_retry_after() -> None:
    client = Client("http://127.0.0.1:1", "t", transport=httpx.MockTransport(_busy))
    with pytest.raises(ServiceUnavailable) as info:
        client.request("GET", "/api/v1/runs/1")
    assert info.value.retry_after == 9.0
    reporter = Reporter(client, run_id=1, backoff=0.5, max_backoff=60.0)
    import time

    before = time.monotonic()
    reporter._unreachable(info.value)  # first failure: own back-off 0.5 s, the service asked for 9 s
    assert 8.5 <= reporter._next_try - before <= 9.5
    capped = Reporter(client, run_id=1, backoff=0.5, max_backoff=4.0)
    capped._unreachable(ServiceUnavailable("busy", retry_after=3600.0))
    assert capped._next_try - time.monotonic() <= 4.0
    client.close()


def test_worker_client_and_backoff_honour_retry_after() -> None:
    worker = ServerClient("http://127.0.0.1:1", "t")
    worker._http = httpx.Client(base_url="http://127.0.0.1:1", transport=httpx.MockTransport(_busy))
    with pytest.raises(Unavailable) as info:
        worker.claim("w", 60.0)
    assert info.value.retry_after == 9.0
    worker.close()
    b = Backoff(cap=5.0)
    b.fail(100.0, info.value.retry_after)
    assert b.next_at == 105.0  # capped
    b = Backoff(cap=30.0)
    b.fail(100.0, info.value.retry_after)
    assert b.next_at == 109.0
    b.fail(200.0, None)
    assert b.next_at == 201.0  # own back-off when no header
