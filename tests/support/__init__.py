"""Helpers shared by tests in several folders (one definition each)."""
