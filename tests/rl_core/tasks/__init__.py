"""Tests of rl_core/tasks."""
