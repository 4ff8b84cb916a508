"""How the worker reaches the service: :class:`scalerl.client.Client` (the one REST client; its lease calls are
``claim_run``, ``renew_lease`` and ``lease_id=`` on ``post_points``/``report_status``), built from the worker's
settings, and what its errors mean to a leased run.

Errors: :class:`~scalerl.client.api.ServiceUnavailable` (network error, 5xx, 429) is retried with the client's one
back-off (:mod:`scalerl.client.retry`); an :class:`~scalerl.client.api.ApiError` 409 on a lease call means the lease
is lost (:func:`lease_lost`: another attempt owns the run, or it left the leased states); any other
:class:`~scalerl.client.api.ApiError` is a refusal that retrying cannot change.
"""

from __future__ import annotations

from scalerl.client.api import ApiError, Client
from worker.settings import WorkerSettings

#: Seconds each request may take (a metrics batch of ``report_batch`` points included).
TIMEOUT_SECONDS = 30.0


def connect(settings: WorkerSettings) -> Client:
    """A client for ``settings.server_url`` with ``settings.token`` exactly (the settings already fell back to the
    saved credentials)."""
    return Client(settings.server_url, settings.token, timeout=TIMEOUT_SECONDS, from_environment=False)


def lease_lost(exc: ApiError) -> bool:
    """A 409 on a lease call: the run is no longer this worker's."""
    return exc.status_code == 409
