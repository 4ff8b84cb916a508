"""Tests of rl_core/models."""
