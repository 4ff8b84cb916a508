"""Tests of rl_core/scaling/fit."""
