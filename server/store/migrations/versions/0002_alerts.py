"""alerts: webhooks, alerts, deliveries, forecast thresholds

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert_webhooks",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("secret", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=10), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("experiment_id", BigId, nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alert_webhooks_experiment_id", "alert_webhooks", ["experiment_id"])
    op.create_table(
        "alerts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("severity", sa.String(length=10), nullable=False),
        sa.Column("experiment_id", BigId, nullable=True),
        sa.Column("run_id", sa.BigInteger(), nullable=True),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("dedupe_key", sa.String(length=300), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("suppressed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alerts_experiment_id", "alerts", ["experiment_id"])
    op.create_index("ix_alerts_run_id", "alerts", ["run_id"])
    op.create_index("ix_alerts_dedupe_key_last_seen_at", "alerts", ["dedupe_key", "last_seen_at"])
    op.create_table(
        "alert_deliveries",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("alert_id", BigId, nullable=False),
        sa.Column("channel", sa.String(length=10), nullable=False),
        sa.Column("webhook_id", BigId, nullable=True),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("response_code", sa.Integer(), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["webhook_id"], ["alert_webhooks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alert_deliveries_alert_id", "alert_deliveries", ["alert_id"])
    op.create_index("ix_alert_deliveries_webhook_id", "alert_deliveries", ["webhook_id"])
    op.create_index("ix_alert_deliveries_status_next_attempt_at", "alert_deliveries", ["status", "next_attempt_at"])
    op.create_table(
        "alert_thresholds",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("experiment_id", BigId, nullable=True),
        sa.Column("direction", sa.String(length=10), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("factor", sa.Float(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alert_thresholds_experiment_id", "alert_thresholds", ["experiment_id"])


def downgrade() -> None:
    op.drop_table("alert_thresholds")
    op.drop_table("alert_deliveries")
    op.drop_table("alerts")
    op.drop_table("alert_webhooks")
