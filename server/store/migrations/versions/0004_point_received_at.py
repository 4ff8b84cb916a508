"""metric_points.received_at: when the service stored each point (the run comparison's wall-time axis)

Points stored before this revision keep NULL (their arrival time is unknown); new ones get the database's time
(``now()``) unless the service sets it. The column is added without a default first, so existing rows are not
stamped with the time of the migration, and the default is set afterwards.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("metric_points", sa.Column("received_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("metric_points") as batch:  # SQLite: copies the table, NULLs kept
        batch.alter_column(
            "received_at",
            existing_type=sa.DateTime(timezone=True),
            existing_nullable=True,
            server_default=sa.func.now(),
        )


def downgrade() -> None:
    with op.batch_alter_table("metric_points") as batch:
        batch.drop_column("received_at")
