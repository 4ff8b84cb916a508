"""Tests of rl_core/recipe."""
