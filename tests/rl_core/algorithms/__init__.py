"""Tests of rl_core/algorithms."""
