"""The contracts between the engine, the worker and the service: torch-free and server-free, imported by all three.

- :mod:`rl_core.contracts.points`: the metric point, its one REST shape (``to_rest``) and metrics rule
  (``keep_metrics``) with the service's limits, the REST paths of a run's points and final status, and the one
  reader of ``metrics.jsonl`` (``MetricsTail``, ``read_points``).
- :mod:`rl_core.contracts.retry`: how a client of the REST API waits before trying again (``retry_after``: the
  ``Retry-After`` header; ``backoff_delay``: the one back-off rule).
- :mod:`rl_core.contracts.run_dir`: the run directory's layout and the resume rule.
- :mod:`rl_core.contracts.run_config`: the run-config schema (pydantic; torch is imported only where models are
  built).
- :mod:`rl_core.contracts.model_config`: the run config's ``model`` section and the base checkpoint's ``sft`` settings.
- :mod:`rl_core.contracts.vllm_options`: the run config's ``generator.vllm`` section (pure pydantic).
- :mod:`rl_core.contracts.data_roots`: local paths a run names are opened only under allowed roots.

Importing this package imports nothing.
"""
