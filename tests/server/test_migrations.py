"""The same Alembic history builds the schema from an empty database on SQLite and on Postgres, and reverses."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect

from server.db import normalise_url
from server.migrate import current, downgrade, head, upgrade
from server.tables import METADATA
from tests.server.conftest import _pg_available, create_pg_database, drop_pg_database, pg_url
from tests.services import unavailable


def _tables(url: str) -> set[str]:
    engine = create_engine(normalise_url(url))
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _roundtrip(url: str) -> None:
    assert current(url) is None
    upgrade(url)
    assert current(url) == head()
    expected = {t.name for t in METADATA.sorted_tables}
    assert expected <= _tables(url)
    downgrade(url, "base")
    assert _tables(url) & expected == set()
    upgrade(url)
    assert current(url) == head()


def test_migrations_sqlite_from_empty(tmp_path: Path) -> None:
    _roundtrip(f"sqlite:///{tmp_path / 'nested' / 'fresh.db'}")


def test_migrations_postgres_from_empty() -> None:
    reason = _pg_available()
    if reason:
        unavailable(reason)
    name = create_pg_database()
    try:
        _roundtrip(pg_url(name))
    finally:
        drop_pg_database(name)


def test_models_match_migrations(tmp_path: Path) -> None:
    """Autogenerate finds nothing to add: the ORM and the migration agree."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    url = f"sqlite:///{tmp_path / 'cmp.db'}"
    upgrade(url)
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), METADATA)
    engine.dispose()
    assert diff == []
