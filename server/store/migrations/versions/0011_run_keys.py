"""runs.key: the identity a trainer's client gives its run (W&B's run id), unique within an experiment.

A registration that carries a key attaches to the run holding it before any rule by name applies, so a retried
registration, an offline run synced twice and a preempted job resumed under its id all reach one run, and two
offline runs that share a name never merge. NULL for runs registered without one (grids, older clients).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

HAS_KEY = sa.text("key IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("key", sa.String(64), nullable=True))
    op.create_index(
        "uq_runs_experiment_key",
        "runs",
        ["experiment_id", "key"],
        unique=True,
        sqlite_where=HAS_KEY,
        postgresql_where=HAS_KEY,
    )


def downgrade() -> None:
    op.drop_index("uq_runs_experiment_key", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("key")
