"""Fitting: the sigmoid and power-law curves, their priors and posteriors, grid fits, and the questions a fit answers.

Invariant: nothing here imports :mod:`rl_core.scaling.decide` or :mod:`rl_core.scaling.measure` (import-linter).
"""
