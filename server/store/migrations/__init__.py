"""Alembic migrations of the scalerl service (one history for SQLite and Postgres); run by ``scalerl db upgrade``."""
