"""Tests of rl_core/contracts."""
