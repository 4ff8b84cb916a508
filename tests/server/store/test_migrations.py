"""The same Alembic history builds the schema from an empty database on SQLite and on Postgres, and reverses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, inspect

from server.store.db import normalise_url
from server.store.migrate import current, downgrade, head, upgrade
from server.store.tables import METADATA
from tests.server.conftest import fresh_pg_database


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
    with fresh_pg_database() as url:
        _roundtrip(url)


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


def _recipe_roundtrip(url: str) -> None:
    """0007 keeps each run's recipe: stored ones become the experiment's base and per-run deltas (a recipe no delta
    reproduces stays whole), the same full recipes are read back, and the downgrade restores the columns."""
    from sqlalchemy import text

    from server.lifecycle.recipes import apply_delta

    upgrade(url, "0006")
    base = {"preset": "scalerl", "batch": {"prompts": 32, "samples": 8}, "optimizer": {"lr": 1e-4}, "notes": [1, 2]}
    recipes = {
        1: base,
        2: {**base, "batch": {"prompts": 48, "samples": 8}},
        3: {"preset": "scalerl", "optimizer": {"lr": 2e-4, "beta": 0.9}, "extra": None},  # keys removed and added
        4: None,  # a run registered without a recipe
    }
    engine = create_engine(normalise_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO experiments (id, name, document, policy_mode, created_at) "
                              "VALUES (1, 'e', '{}', 'recommend', CURRENT_TIMESTAMP)"))  # fmt: skip
            for i, recipe in recipes.items():
                conn.execute(
                    text(
                        "INSERT INTO runs (id, experiment_id, name, recipe, overrides, status, status_reason, "
                        "attempts, created_at, updated_at, n_points, compute_used) VALUES (:i, 1, :n, :r, '{}', "
                        "'queued', '', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 0, 0)"
                    ),
                    {"i": i, "n": f"r{i}", "r": None if recipe is None else json.dumps(recipe)},
                )
        upgrade(url)
        with engine.connect() as conn:
            stored_base = _json(conn.execute(text("SELECT base_recipe FROM experiments")).scalar())
            rows = {r.id: r for r in conn.execute(text("SELECT id, recipe, recipe_delta FROM runs"))}
        assert stored_base == base
        for i, recipe in recipes.items():
            row = rows[i]
            if recipe is None:
                assert _json(row.recipe) is None and _json(row.recipe_delta) is None
                continue
            assert _json(row.recipe) is None, i  # only a delta is stored
            assert apply_delta(stored_base, _json(row.recipe_delta)) == recipe, i
        assert len(str(rows[1].recipe_delta)) < 10  # the base run changes nothing
        downgrade(url, "0006")
        with engine.connect() as conn:
            back = {r.id: _json(r.recipe) for r in conn.execute(text("SELECT id, recipe FROM runs"))}
        assert back == recipes
    finally:
        engine.dispose()


def _json(value: object) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def test_recipes_move_to_the_experiment_sqlite(tmp_path: Path) -> None:
    _recipe_roundtrip(f"sqlite:///{tmp_path / 'recipes.db'}")


def test_recipes_move_to_the_experiment_postgres() -> None:
    with fresh_pg_database() as url:
        _recipe_roundtrip(url)
