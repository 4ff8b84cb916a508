"""Tests of rl_core/generation."""
