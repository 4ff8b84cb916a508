"""Transient database failures (deadlocks, a busy SQLite file) retry the whole transaction; others propagate."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from server.store.db import is_transient, make_engine, session_factory, with_retries


def _flaky(failures: list[Exception]) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def work() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "done"

    return calls, work


def test_deadlocks_and_busy_sqlite_are_retried() -> None:
    deadlock = OperationalError("UPDATE runs", {}, psycopg.errors.DeadlockDetected())
    busy = OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    assert is_transient(deadlock) and is_transient(busy)
    calls, work = _flaky([deadlock, busy])
    assert with_retries(work) == "done" and len(calls) == 3


def test_other_errors_and_exhausted_retries_propagate() -> None:
    duplicate = IntegrityError("INSERT", {}, psycopg.errors.UniqueViolation())
    assert not is_transient(duplicate) and not is_transient(ValueError("x"))
    calls, work = _flaky([duplicate])
    with pytest.raises(IntegrityError):
        with_retries(work)
    assert len(calls) == 1
    deadlocks: list[Exception] = [OperationalError("x", {}, psycopg.errors.DeadlockDetected()) for _ in range(3)]
    calls, work = _flaky(deadlocks)
    with pytest.raises(OperationalError):
        with_retries(work, attempts=3)
    assert len(calls) == 3


def test_a_sqlite_write_begun_in_one_thread_and_committed_in_another_frees_the_writer(tmp_path: Path) -> None:
    """FastAPI opens a POST's transaction in the endpoint's thread and commits it in the dependency's exit thread.
    The process's writer lock must be released all the same, or every later writer waits for ever (CI hung here)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'w.db'}")
    sessions = session_factory(engine)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    with ThreadPoolExecutor(1) as first, ThreadPoolExecutor(1) as second:
        session = sessions()
        tx = session.begin()
        first.submit(lambda: session.execute(text("INSERT INTO t VALUES (1)"))).result()
        second.submit(tx.commit).result()
        session.close()
        # A writer on a third thread gets the lock at once (it waited 30 s, then for ever, before the fix).
        done = first.submit(lambda: _insert(sessions, 2))
        assert done.result(timeout=5) is None
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM t")).scalar() == 2


def _insert(sessions: sessionmaker[Session], x: int) -> None:
    with sessions.begin() as session:
        session.execute(text("INSERT INTO t VALUES (:x)"), {"x": x})
