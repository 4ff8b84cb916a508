"""Tests of server/assess/ (fits, decisions, the stored assessment)."""
