"""The worker's side of the REST API: claim, heartbeat, metrics, status, reads. One try per call.

Errors are classified for the callers' retry loops: :class:`Unavailable` (network error, 5xx, 429: try again
later), :class:`LeaseLost` (409: the run is no longer this worker's), :class:`Refused` (other 4xx: retrying
cannot help).
"""

from __future__ import annotations

from typing import Any

import httpx

from rl_core.contracts.points import metrics_path, status_body, status_path
from scalerl.client.api import retry_after


class Unavailable(Exception):
    """The server could not answer now (retry with back-off; at least ``retry_after`` seconds when its
    ``Retry-After`` header asked for it)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LeaseLost(Exception):
    """The server refused a lease operation (409): another attempt owns the run, or it left the leased states."""


class Refused(Exception):
    """The server rejected the request (4xx other than 409 and 429)."""


class ServerClient:
    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise Unavailable(f"{type(exc).__name__}: {exc}") from None
        if resp.status_code >= 500 or resp.status_code == 429:
            raise Unavailable(f"HTTP {resp.status_code} from {path}", retry_after(resp.headers.get("retry-after")))
        if resp.status_code == 409:
            raise LeaseLost(_detail(resp))
        if resp.status_code >= 400:
            raise Refused(f"HTTP {resp.status_code} from {path}: {_detail(resp)}")
        return resp.json() if resp.content else None

    def claim(self, worker: str, lease_seconds: float) -> dict[str, Any] | None:
        """The lease on the oldest queued run (``{"run", "lease_id", ...}``), or None when nothing is queued."""
        answer = self._call("POST", "/api/v1/runs/claim", json={"worker": worker, "lease_seconds": lease_seconds})
        return answer if isinstance(answer, dict) else None

    def heartbeat(self, run_id: int, lease_id: str, lease_seconds: float) -> dict[str, Any]:
        body = {"lease_id": lease_id, "lease_seconds": lease_seconds}
        answer: dict[str, Any] = self._call("POST", f"/api/v1/runs/{run_id}/heartbeat", json=body)
        return answer

    def post_metrics(self, run_id: int, lease_id: str, points: list[dict[str, Any]]) -> dict[str, Any]:
        answer: dict[str, Any] = self._call(
            "POST", metrics_path(run_id), params={"lease_id": lease_id}, json={"points": points}
        )
        return answer

    def report_status(self, run_id: int, lease_id: str, status: str, reason: str) -> dict[str, Any]:
        body = status_body(status, reason, lease_id)
        answer: dict[str, Any] = self._call("POST", status_path(run_id), json=body)
        return answer

    def get_run(self, run_id: int) -> dict[str, Any]:
        answer: dict[str, Any] = self._call("GET", f"/api/v1/runs/{run_id}")
        return answer

    def get_experiment(self, experiment_id: int) -> dict[str, Any]:
        """The experiment (its document; none of its runs: the answer pages them)."""
        answer: dict[str, Any] = self._call("GET", f"/api/v1/experiments/{experiment_id}?runs_limit=0")
        return answer


def _detail(resp: httpx.Response) -> str:
    try:
        detail = resp.json().get("detail")
    except ValueError:
        return resp.text[:500]
    return str(detail)[:1000]
