"""runs.releases: how many of a run's starts ended with its worker handing it back on shutdown.

A worker stopped by a deploy (``docker compose down``, a rolling update) reports its leased run ``lost`` with
``release: true``; the run resumes from its checkpoint on the next worker. Such starts are not failures: the
supervisor's automatic retries count ``attempts - releases``, so a stack restarted five times does not use up a
run's retries.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("releases", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("releases")
