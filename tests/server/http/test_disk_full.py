"""A database that cannot grow answers a JSON 503 that says "disk full" (with ``Retry-After``), loses nothing already
stored, and takes writes again as soon as it can grow, without a restart."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from psycopg.errors import DiskFull
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from starlette.requests import Request

from server.http.errors import database_unavailable, is_disk_full
from tests.aio import run as run_coroutine
from tests.server.conftest import Service, make_settings, start_service

#: SQLite's largest page count, its default ``max_page_count``: no cap.
NO_CAP = 4_294_967_294


@pytest.fixture
def capped(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[Service, dict[str, int], Path]]:
    """A SQLite service whose every connection applies ``cap["pages"]`` as ``PRAGMA max_page_count`` whenever it
    is used: SQLite then fails a write that would grow the file past it with SQLITE_FULL ("database or disk is
    full"), exactly as a full disk does."""
    db = tmp_path / "full.db"
    shutil.copy(sqlite_template, db)
    cap = {"pages": NO_CAP}

    def apply(dbapi_conn: Any, *_: Any) -> None:
        dbapi_conn.execute(f"PRAGMA max_page_count = {cap['pages']}")

    with contextmanager(start_service)(make_settings(f"sqlite:///{db}", tmp_path)) as service:
        # "connect" for connections opened from now on, "checkout" for those already pooled (and a raised cap).
        event.listen(service.ctx.engine, "connect", apply)
        event.listen(service.ctx.engine, "checkout", apply)
        yield service, cap, db


def _metrics(step: int) -> dict[str, float]:
    return {f"m{k:02d}": step + k / 100 for k in range(24)}


def _batch(start: int, n: int) -> dict[str, Any]:
    return {
        "points": [
            {"step": s, "compute": float(s + 1), "pass_rate": 0.5, "metrics": _metrics(s)}
            for s in range(start, start + n)
        ]
    }


def test_a_full_sqlite_database_says_disk_full_keeps_its_data_and_recovers(
    capped: tuple[Service, dict[str, int], Path],
) -> None:
    service, cap, db = capped
    c, h = service.client, service.write
    run = c.post("/api/v1/runs", json={"name": "full"}, headers=h).json()["id"]
    with sqlite3.connect(db) as raw:
        pages = raw.execute("PRAGMA page_count").fetchone()[0]
    cap["pages"] = pages + 12  # about 48 KiB more: a few batches of 20 points (~10 KiB each) fit
    stored = 0
    for _ in range(100):
        r = c.post(f"/api/v1/runs/{run}/metrics", json=_batch(stored, 20), headers=h)
        if r.status_code != 200:
            break
        assert r.json()["accepted"] == 20
        stored += 20
    else:
        pytest.fail("the capped database never filled up")
    assert stored > 0, f"the cap left no room for a single batch: {r.status_code} {r.text}"
    assert r.status_code == 503 and r.headers["content-type"] == "application/json", r.text
    assert int(r.headers["retry-after"]) >= 1
    detail = r.json()["detail"]
    assert "disk full" in detail and "could not grow" in detail and "free space and retry" in detail, detail
    # Everything stored before is intact, and the failed batch left nothing behind.
    points = c.get(f"/api/v1/runs/{run}/metrics", headers=service.read).json()
    assert [p["step"] for p in points] == list(range(stored))
    assert all(p["metrics"] == _metrics(p["step"]) for p in points)
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Space returns: the same batch is accepted at once, by the same running service.
    cap["pages"] = NO_CAP
    r = c.post(f"/api/v1/runs/{run}/metrics", json=_batch(stored, 20), headers=h)
    assert r.status_code == 200 and r.json()["accepted"] == 20, r.text
    points = c.get(f"/api/v1/runs/{run}/metrics", headers=service.read).json()
    assert [p["step"] for p in points] == list(range(stored + 20))
    service.drain()  # the off-request refits, some of which met the full disk, catch up too


def _answer(exc: Exception) -> tuple[int, dict[str, str], dict[str, Any]]:
    response = run_coroutine(database_unavailable(Request({"type": "http", "headers": []}), exc))
    return response.status_code, dict(response.headers), json.loads(bytes(response.body))


def test_postgres_disk_full_maps_to_the_same_answer() -> None:
    """PostgreSQL: a unit test of the mapping only (psycopg's ``DiskFull``, SQLSTATE 53100, wrapped by SQLAlchemy
    as the driver raises it); filling a real PostgreSQL disk is not something a test can do safely."""
    orig = DiskFull('could not extend file "base/16384/16397": No space left on device')
    assert orig.sqlstate == "53100"
    exc = OperationalError("INSERT INTO points ...", {}, orig)
    assert is_disk_full(exc) and is_disk_full(orig)
    status, headers, body = _answer(exc)
    assert status == 503 and int(headers["retry-after"]) >= 1
    assert "disk full" in body["detail"] and "free space and retry" in body["detail"]


def test_other_database_errors_keep_their_answers() -> None:
    busy = OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    down = OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))
    full = OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full"))
    assert not is_disk_full(busy) and not is_disk_full(down) and is_disk_full(full)
    assert "busy" in _answer(busy)[2]["detail"]
    assert "unavailable (ConnectionRefusedError)" in _answer(down)[2]["detail"]
    assert "disk full" in _answer(full)[2]["detail"]
