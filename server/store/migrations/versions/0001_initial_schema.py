"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 05:03:32.209756
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.String(length=100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "experiments",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("policy_mode", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("type", sa.String(length=30), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_experiment_id_id", ["experiment_id", "id"], unique=False)

    op.create_table(
        "recommendation_snapshots",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("recommendation_snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_recommendation_snapshots_experiment_id"), ["experiment_id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("task", sa.String(length=200), nullable=True),
        sa.Column("model", sa.String(length=300), nullable=True),
        sa.Column("recipe", sa.JSON(), nullable=True),
        sa.Column("overrides", sa.JSON(), nullable=False),
        sa.Column("budget", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_id", sa.String(length=64), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("n_points", sa.Integer(), nullable=False),
        sa.Column("compute_used", sa.Float(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("latest_fit_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("experiment_id", "name", name="uq_runs_experiment_name"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_experiment_id"), ["experiment_id"], unique=False)
        batch_op.create_index("ix_runs_status", ["status"], unique=False)

    op.create_table(
        "fit_snapshots",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("n_points", sa.Integer(), nullable=False),
        sa.Column("compute_max", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=30), nullable=False),
        sa.Column("A", sa.Float(), nullable=True),
        sa.Column("B", sa.Float(), nullable=True),
        sa.Column("C_mid", sa.Float(), nullable=True),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("fit_snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_fit_snapshots_run_id"), ["run_id"], unique=False)

    op.create_table(
        "metric_points",
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("compute", sa.Float(), nullable=False),
        sa.Column("pass_rate", sa.Float(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "step"),
    )
    op.create_table(
        "run_transitions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("from_status", sa.String(length=20), nullable=True),
        sa.Column("to_status", sa.String(length=20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("run_transitions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_transitions_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_transitions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_transitions_run_id"))

    op.drop_table("run_transitions")
    op.drop_table("metric_points")
    with op.batch_alter_table("fit_snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_fit_snapshots_run_id"))

    op.drop_table("fit_snapshots")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_status")
        batch_op.drop_index(batch_op.f("ix_runs_experiment_id"))

    op.drop_table("runs")
    with op.batch_alter_table("recommendation_snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_recommendation_snapshots_experiment_id"))

    op.drop_table("recommendation_snapshots")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_experiment_id_id")

    op.drop_table("events")
    op.drop_table("experiments")
    op.drop_table("api_tokens")
