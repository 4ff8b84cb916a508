"""Measuring: backtests of forecasts and replays of decisions on recorded curves, and the corpora they read.

Invariant: may use :mod:`rl_core.scaling.fit` and :mod:`rl_core.scaling.decide`; nothing below imports this package.
"""
