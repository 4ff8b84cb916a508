"""Transient database failures (deadlocks, a busy SQLite file) retry the whole transaction; others propagate."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from server.db import is_transient, with_retries


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
