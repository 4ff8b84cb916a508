"""rl_core: the scalerl library, usable without the service.

- :mod:`rl_core.scaling`: compute-performance curve fitting and forecasting (numpy/scipy only, never torch).
"""
