"""jobs: work a request started (an experiment's recommendations, assessed off the request) and its status URL.

A row per job, so that every server process behind the database answers ``GET /api/v1/jobs/{id}``, whichever one
runs it. ``uq_jobs_active`` (partial: status queued or running) lets at most one job of a kind per experiment be
active, across processes; ``ix_jobs_finished_at`` serves the deletion of jobs finished long ago.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ACTIVE = sa.text("status IN ('queued', 'running')")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column(
            "experiment_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index(
        "uq_jobs_active",
        "jobs",
        ["experiment_id", "kind"],
        unique=True,
        sqlite_where=ACTIVE,
        postgresql_where=ACTIVE,
    )
    op.create_index("ix_jobs_finished_at", "jobs", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_jobs_finished_at", table_name="jobs")
    op.drop_index("uq_jobs_active", table_name="jobs")
    op.drop_table("jobs")
