"""The RL engine: ``run(cfg, out)`` trains one run config into a run directory (``rl_core.engine.runner``).

Importing this package imports nothing: ``rl_core.engine.sinks`` stays torch-free, the trainer modules import
torch. What the engine exchanges with the worker and the service (points, run directory, run config) is
``rl_core.contracts``.
"""
