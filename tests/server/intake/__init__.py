"""Tests of server/intake/ (metric points in)."""
