"""experiments.base_recipe, runs.recipe_delta: a grid's recipe stored once per experiment, each run only what it
changes (a 1 MB request with 256 runs stored 517 MB, every run holding the full recipe).

Existing runs are migrated experiment by experiment: the recipe of its first run (by id) becomes the experiment's
base, and each run with a recipe keeps only its delta when the delta reproduces the recipe exactly (else the whole
recipe stays). The delta format and its functions are those of ``server.lifecycle.recipes``, copied here so that this
migration never changes with the application.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_runs = sa.table(
    "runs",
    sa.column("id", sa.BigInteger()),
    sa.column("experiment_id", sa.BigInteger()),
    sa.column("recipe", sa.JSON()),
    sa.column("recipe_delta", sa.JSON()),
)
_experiments = sa.table("experiments", sa.column("id", sa.BigInteger()), sa.column("base_recipe", sa.JSON()))


def _delta(base: dict[str, Any], recipe: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    stack: list[tuple[list[str], dict[str, Any], dict[str, Any]]] = [([], base, recipe)]
    while stack:
        path, old, new = stack.pop()
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(old.get(key), dict):
                stack.append(([*path, key], old[key], value))
            elif key not in old or old[key] != value or type(old[key]) is not type(value):
                out.append([[*path, key], value])
        out.extend([[*path, key]] for key in old if key not in new)
    return out


def _apply(base: dict[str, Any], delta: list[list[Any]]) -> dict[str, Any]:
    out = dict(base)
    for op_ in delta:
        path = op_[0]
        node = out
        for key in path[:-1]:
            child = node.get(key)
            node[key] = dict(child) if isinstance(child, dict) else {}
            node = node[key]
        if len(op_) == 2:
            node[path[-1]] = op_[1]
        else:
            node.pop(path[-1], None)
    return out


def upgrade() -> None:
    op.add_column("experiments", sa.Column("base_recipe", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("recipe_delta", sa.JSON(), nullable=True))
    conn = op.get_bind()
    experiments = conn.execute(
        sa.select(_runs.c.experiment_id).where(_runs.c.recipe.is_not(None)).distinct().order_by(_runs.c.experiment_id)
    ).scalars()
    for experiment_id in list(experiments):
        rows = conn.execute(
            sa.select(_runs.c.id, _runs.c.recipe)
            .where(_runs.c.experiment_id == experiment_id, _runs.c.recipe.is_not(None))
            .order_by(_runs.c.id)
        ).all()
        base = next((r.recipe for r in rows if isinstance(r.recipe, dict)), None)  # JSON null reads as None
        if base is None:
            continue
        conn.execute(sa.update(_experiments).where(_experiments.c.id == experiment_id).values(base_recipe=base))
        for row in rows:
            if not isinstance(row.recipe, dict):
                continue
            delta = _delta(base, row.recipe)
            if _apply(base, delta) == row.recipe:
                conn.execute(sa.update(_runs).where(_runs.c.id == row.id).values(recipe=sa.null(), recipe_delta=delta))


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_runs.c.id, _runs.c.recipe_delta, _experiments.c.base_recipe)
        .join(_experiments, _experiments.c.id == _runs.c.experiment_id)
        .where(_runs.c.recipe_delta.is_not(None))
    ).all()
    for row in rows:
        recipe = _apply(row.base_recipe or {}, row.recipe_delta)
        conn.execute(sa.update(_runs).where(_runs.c.id == row.id).values(recipe=recipe))
    # ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), not a batch copy: recreating ``experiments`` on SQLite would
    # drop the old table, and with foreign keys on, its runs with it (ON DELETE CASCADE).
    op.execute("ALTER TABLE runs DROP COLUMN recipe_delta")
    op.execute("ALTER TABLE experiments DROP COLUMN base_recipe")
