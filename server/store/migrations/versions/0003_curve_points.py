"""runs.curve_points: the number of stored points with a pass rate (the full-fit cache's key)

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("curve_points", sa.Integer(), nullable=False, server_default="0"))
    op.execute(
        "UPDATE runs SET curve_points = (SELECT count(*) FROM metric_points m "
        "WHERE m.run_id = runs.id AND m.pass_rate IS NOT NULL)"
    )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("curve_points")
