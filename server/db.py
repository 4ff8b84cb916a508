"""Engine and session factory. SQLite gets WAL, foreign keys and a busy timeout; Postgres uses psycopg 3.

Invariant: every write goes through a session from :func:`session_factory` inside ``with session.begin()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def normalise_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

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
            if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":  # single reads need no lock
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
