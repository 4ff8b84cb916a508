"""Run the Alembic migrations programmatically, from any working directory and from an installed package.

The scripts live in the ``server.store.migrations`` package (so they ship inside the wheel and every image); no
``alembic.ini`` is
needed. Developers can still run Alembic directly: ``alembic -c server/store/migrations/alembic.ini ...``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from server.store import migrations
from server.store.db import normalise_url


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    cfg.set_main_option("sqlalchemy.url", normalise_url(database_url).replace("%", "%%"))
    return cfg


def head() -> str:
    """The newest revision of the migration scripts."""
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).resolve().parent))
    rev = ScriptDirectory.from_config(cfg).get_current_head()
    assert rev is not None
    return rev


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the database at ``database_url`` to ``revision`` (creating it from empty if needed)."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def current(database_url: str) -> str | None:
    """The revision the database is at (``None`` for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    from server.store.db import make_engine

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
