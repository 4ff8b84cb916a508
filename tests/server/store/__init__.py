"""Tests of server/store/ (database, migrations)."""
