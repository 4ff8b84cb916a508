"""Tests of rl_core/scaling/decide."""
