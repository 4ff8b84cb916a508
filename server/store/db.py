"""Engine and session factory. SQLite gets WAL, foreign keys, a busy timeout and one writer at a time per
process; Postgres uses psycopg 3.

Invariant: every write goes through a session from :func:`session_factory` inside ``with session.begin()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, Select, create_engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import QueryableAttribute, Session, SessionTransaction, SessionTransactionOrigin, sessionmaker

T = TypeVar("T")


def normalise_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


#: Seconds a SQLite writer waits for the write lock (the process's own, then SQLite's busy handler).
_SQLITE_BUSY_TIMEOUT_S = 30.0


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": _SQLITE_BUSY_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # Take the write lock up front: a deferred transaction that reads, then writes, fails at once with
            # SQLITE_BUSY when another connection wrote in between; IMMEDIATE waits for the busy timeout instead.
            # Reads (autocommit, or a session used without ``begin()``: see session_factory) take no lock: in WAL
            # mode they read a snapshot and never wait for a writer.
            options = conn.get_execution_options()
            if options.get("isolation_level") == "AUTOCOMMIT":
                return
            if options.get(READ_ONLY):
                conn.exec_driver_sql("BEGIN")
                return
            # One writer per process waits on a lock that is handed over at once, instead of many threads polling
            # SQLite's busy handler (it sleeps up to 100 ms between tries, so the file is often free while every
            # writer sleeps: under 100 clients, POSTs queued for seconds). Other processes still meet the timeout.
            # A plain Lock, not an RLock: FastAPI opens a request's transaction in the endpoint's worker thread and
            # commits it in another (the dependency's exit), so the lock must not belong to a thread (an RLock
            # released from the wrong thread stayed held, and every later writer waited for ever). If it cannot be
            # had within the busy timeout, SQLite's own busy handler decides, as it would without the lock.
            if writer.acquire(timeout=_SQLITE_BUSY_TIMEOUT_S):
                conn.info[_HOLDS_WRITER] = True
            try:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            except BaseException:
                _release(conn)
                raise

        writer = threading.Lock()

        def _release(conn: Any) -> None:
            if conn.info.pop(_HOLDS_WRITER, False):
                writer.release()

        event.listen(engine, "commit", _release)
        event.listen(engine, "rollback", _release)
        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


#: ``Connection.info`` key: the connection's transaction holds its engine's writer lock (SQLite).
_HOLDS_WRITER = "scalerl_holds_writer"

#: Execution option of the connections of sessions that only read (SQLite: a deferred ``BEGIN``, no write lock).
READ_ONLY = "scalerl_read_only"


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions for the service. Invariant: a session that writes is used as ``with sessions.begin()`` (SQLite:
    ``BEGIN IMMEDIATE``, the write lock up front); one used without ``begin()`` (its transaction autobegins) only
    reads, and on SQLite its transaction is deferred, so it never waits for a writer (dashboard reads
    and the event stream waited 7.5 s behind an 8 s writer)."""
    maker = sessionmaker(engine, expire_on_commit=False)

    @event.listens_for(maker, "after_transaction_create")
    def _mark(session: Session, transaction: SessionTransaction) -> None:
        if transaction.parent is None:
            reads = transaction.origin is SessionTransactionOrigin.AUTOBEGIN
            session.execution_options = session.execution_options.union({READ_ONLY: reads})

    return maker


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session for reads only, in autocommit: it never holds a transaction or (on SQLite) the write lock."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn, Session(bind=conn) as session:
        yield session


#: SQLSTATEs of failures that a retry of the whole transaction fixes: serialization failure, deadlock, lock timeout.
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})


def is_transient(exc: BaseException) -> bool:
    """True for a database error that retrying the whole transaction can fix (deadlock, busy SQLite)."""
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    if getattr(orig, "sqlstate", None) in _TRANSIENT_SQLSTATES:
        return True
    return "database is locked" in str(orig)


def with_retries(work: Callable[[], T], attempts: int = 3) -> T:
    """Run ``work`` (one whole transaction) again when it failed transiently; other errors propagate."""
    for attempt in range(attempts):
        try:
            return work()
        except DBAPIError as exc:
            if attempt == attempts - 1 or not is_transient(exc):
                raise
            time.sleep(0.01 * 2**attempt)
    raise AssertionError("unreachable")


SelectT = TypeVar("SelectT", bound=Select[Any])


def where_given(stmt: SelectT, *filters: tuple[QueryableAttribute[Any], object]) -> SelectT:
    """``stmt`` filtered on ``column == value`` for each ``(column, value)`` whose value is given (not None): the
    optional equality filters of a list endpoint."""
    for column, value in filters:
        if value is not None:
            stmt = stmt.where(column == value)
    return stmt
