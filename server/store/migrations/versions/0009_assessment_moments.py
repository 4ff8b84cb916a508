"""assessment_moments: the append-only record of an experiment's decision moments (the scorecard reads it).

The stored assessment is replaced at each state; what the scorecard grades needs the moments it replaced: when the
verdict was first decided and whether it changed since (``verdict``), each run's forecast at 30% and 50% of its
budget (``forecast``), and each run's forecast when it was stopped (``stop``, and ``resume`` when it was brought
back). A row is added in the transaction that stores the assessment it was read from, and never updated.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "assessment_moments",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column(
            "experiment_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_assessment_moments_experiment_id_id", "assessment_moments", ["experiment_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_assessment_moments_experiment_id_id", table_name="assessment_moments")
    op.drop_table("assessment_moments")
