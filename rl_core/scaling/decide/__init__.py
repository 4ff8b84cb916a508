"""Deciding: per-run and grid stop/scale decisions from fits (rules, rungs, equal-compute stops, resume).

Invariant: uses :mod:`rl_core.scaling.fit` only, never :mod:`rl_core.scaling.measure` (import-linter).
"""
