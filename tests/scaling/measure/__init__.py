"""Tests of rl_core/scaling/measure."""
