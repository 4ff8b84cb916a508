"""A real uvicorn server in a thread (for SSE streaming and the CLI against HTTP)."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from scalerl.app import create_app
from server.app import serve_options
from server.runtime.context import ServiceContext
from tests.server.conftest import Service, make_settings, start_service


@contextmanager
def live_server(ctx: ServiceContext, port: int = 0) -> Iterator[str]:
    """Serve ``ctx`` on 127.0.0.1 (on ``port``, or a free one when 0) until the context ends; yields the URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    options = {**serve_options(ctx.settings), "timeout_graceful_shutdown": 1}
    config = uvicorn.Config(create_app(ctx=ctx), log_level="warning", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def served(database_url: str, home: Path, **overrides: object) -> Iterator[tuple[Service, str]]:
    """A whole service (settings, context, migrated database) behind a live server: ``(service, base URL)``."""
    gen = start_service(make_settings(database_url, home, **overrides))
    service = next(gen)
    try:
        with live_server(service.ctx) as url:
            yield service, url
    finally:
        gen.close()


@contextmanager
def sqlite_served(tmp_path: Path, template: Path, **overrides: object) -> Iterator[tuple[Service, str, Path]]:
    """``served`` on a copy of the migrated SQLite database ``template``: ``(service, base URL, database file)``."""
    db = tmp_path / "served.db"
    shutil.copy(template, db)
    with served(f"sqlite:///{db}", tmp_path, **overrides) as (service, url):
        yield service, url, db


def make_runs(service: Service, url: str, n: int) -> list[int]:
    """``n`` runs (``r0``, ``r1``, ...) created over HTTP; their ids."""
    return [
        httpx.post(f"{url}/api/v1/runs", json={"name": f"r{i}"}, headers=service.write).json()["id"] for i in range(n)
    ]


def hold_write_lock(db: Path) -> sqlite3.Connection:
    """A raw connection holding the SQLite database's write lock (``BEGIN IMMEDIATE``): every write waits until the
    caller runs ``ROLLBACK`` on it."""
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    return raw
