"""runs.last_seen_at, runs.heartbeat_seconds, runs.config, runs.tags, runs.notes, runs.summary: the life of a run
reported by your own trainer.

``last_seen_at`` is the last time the run's trainer was heard from (a metrics batch or a heartbeat);
``heartbeat_seconds`` is how often its client promised a heartbeat (NULL: it promised none, and a silent run is
never taken for crashed). ``config`` (a flat JSON object), ``tags`` (a JSON list of strings) and ``notes`` are the
user's description of the run, shown beside it and compared between runs; ``summary`` (a flat JSON object) the
values the user reports as the run's outcome (W&B's ``run.summary``).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("heartbeat_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("config", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("tags", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("notes", sa.Text(), nullable=True))
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name in ("summary", "notes", "tags", "config", "heartbeat_seconds", "last_seen_at"):
            batch.drop_column(name)
