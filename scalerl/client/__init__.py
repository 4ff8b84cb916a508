"""A small typed client for the scalerl REST API (needs only ``httpx``: ``pip install 'scalerl[client]'``).

- :class:`Client`: one request per call, explicit timeouts, errors as exceptions (:class:`ApiError` for a refused
  request, :class:`ServiceUnavailable` when the service cannot be reached or answers 429/5xx). The one HTTP client
  of the API: the CLI, the worker (its lease calls) and the :class:`Reporter` all use it, with one retry policy
  (:mod:`scalerl.client.retry`) and one encoder of a point (``rl_core.contracts.points.to_rest``).
- :class:`Reporter`: what a training loop uses. ``log()`` never blocks and never raises on a network problem:
  points are buffered and sent in batches by a background thread, retried with back-off while the service is down
  (it says so on the ``scalerl.client`` logger), idempotent by step; ``action``/``should_stop`` carry the
  service's answer; ``finish()`` flushes and reports the final status.

    from scalerl.client import Reporter
    rep = Reporter.start("grpo-lr1e-6", budget=500.0)            # URL/token: arguments, SCALERL_URL/SCALERL_TOKEN
    for step in ...:                                             # or ~/.scalerl/credentials.json
        rep.log(step, compute=gpu_hours, pass_rate=val, loss=loss)
        if rep.should_stop:
            save_checkpoint(); break
    rep.finish("stopped" if rep.should_stop else "succeeded")
"""

from scalerl.client.api import (
    ApiError,
    Client,
    Forecast,
    MetricsAnswer,
    Point,
    RunInfo,
    ScalerlError,
    ServiceUnavailable,
)
from scalerl.client.reporter import Reporter

__all__ = [
    "ApiError",
    "Client",
    "Forecast",
    "MetricsAnswer",
    "Point",
    "Reporter",
    "RunInfo",
    "ScalerlError",
    "ServiceUnavailable",
]
