"""Fixtures: every service test runs against SQLite and against a real PostgreSQL (an isolated database per session).

PostgreSQL is taken from SCALERL_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/postgres, used only to
create and drop ``scalerl_test_<random>``). When it is unreachable the Postgres variants are skipped with the reason.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from scalerl.app import create_app
from server.lifecycle.tokens import create_token
from server.runtime.context import ServiceContext
from server.store.migrate import upgrade
from server.store.settings import Settings
from server.store.tables import METADATA
from tests.services import unavailable

ADMIN_PG = os.environ.get("SCALERL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_available() -> str | None:
    try:
        with psycopg.connect(ADMIN_PG, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {ADMIN_PG} is not reachable ({type(exc).__name__}); start it to run these tests"


def create_pg_database() -> str:
    name = f"scalerl_test_{secrets.token_hex(6)}"
    with psycopg.connect(ADMIN_PG, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


@contextmanager
def fresh_pg_database() -> Iterator[str]:
    """An empty database (no tables), dropped afterwards; skips (fails under CI) when Postgres is down."""
    reason = _pg_available()
    if reason:
        unavailable(reason)
    name = create_pg_database()
    try:
        yield pg_url(name)
    finally:
        drop_pg_database(name)


@contextmanager
def migrated_pg_database() -> Iterator[str]:
    """A fresh database migrated to head, dropped afterwards; skips (fails under CI) when Postgres is down."""
    with fresh_pg_database() as url:
        upgrade(url)
        yield url


def drop_pg_database(name: str) -> None:
    with psycopg.connect(ADMIN_PG, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_url(name: str) -> str:
    return ADMIN_PG.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A migrated, isolated Postgres database for the whole session (dropped at the end)."""
    with migrated_pg_database() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty, migrated database of each kind."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "scalerl.db"
        shutil.copy(template, path)
        yield f"sqlite:///{path}"
        return
    url: str = request.getfixturevalue("pg_database")
    yield url
    import sqlalchemy

    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        tables = ", ".join(t.name for t in METADATA.sorted_tables)
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()


@dataclass
class Service:
    client: TestClient
    ctx: ServiceContext
    admin: dict[str, str]
    write: dict[str, str]
    read: dict[str, str]

    def drain(self) -> None:
        """Wait for the off-request refits (point fits, then intervals and recommendations) to finish."""
        assert self.ctx.drain(60.0)


def make_settings(database_url: str, home: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": database_url,
        "home": home,
        "interval_refit_min_seconds": 0.0,
        "reaper_interval_seconds": 3600.0,
        "fit_workers": 0,
        "allowed_hosts": ("testserver", "localhost", "127.0.0.1", "::1"),  # TestClient and schemathesis: testserver
        **overrides,
    }
    return Settings(**values)  # type: ignore[arg-type]


def start_service(settings: Settings) -> Iterator[Service]:
    ctx = ServiceContext.build(settings)
    headers = {}
    with ctx.sessions.begin() as session:
        for scope in ("admin", "write", "read"):
            secret = create_token(session, f"test-{scope}", [scope]).secret  # type: ignore[list-item]
            headers[scope] = {"Authorization": f"Bearer {secret}"}
    with TestClient(create_app(ctx=ctx)) as client:
        yield Service(client, ctx, headers["admin"], headers["write"], headers["read"])
    ctx.engine.dispose()


@pytest.fixture
def service(database_url: str, tmp_path: Path) -> Iterator[Service]:
    yield from start_service(make_settings(database_url, tmp_path))
