"""assessments: one stored assessment per experiment (every surface reads it); alerts.resolved_at / resolution; runs.compute_unit

An alert that a later assessment withdraws (a stop it no longer advises) is resolved with the reason, never deleted.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "assessments",
        sa.Column(
            "experiment_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(64), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("data_as_of", sa.DateTime(timezone=True), nullable=False),
    )
    op.add_column("alerts", sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("alerts", sa.Column("resolution", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("compute_unit", sa.String(50), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("compute_unit")
    with op.batch_alter_table("alerts") as batch:
        batch.drop_column("resolution")
        batch.drop_column("resolved_at")
    op.drop_table("assessments")
