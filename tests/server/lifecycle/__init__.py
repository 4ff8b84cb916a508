"""Tests of server/lifecycle/ (experiments, runs, tokens, policies)."""
