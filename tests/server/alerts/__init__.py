"""Tests of server/alerts/ (where alerts may go)."""
