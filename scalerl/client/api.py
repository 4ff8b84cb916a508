"""The request layer: typed bodies and answers of the REST API (docs/api.md) and one call per request.

Contract: every method either returns a typed answer or raises. :class:`ApiError` (a 4xx: the request itself is
wrong or not allowed; retrying it changes nothing) carries the status code and the server's ``detail``;
:class:`ServiceUnavailable` (no connection, a timeout, a 429 or a 5xx) is worth retrying later. Numbers are sent
as real JSON numbers (``int`` steps, ``float`` compute and values), never strings.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from rl_core.contracts.points import MAX_METRICS
from rl_core.contracts.points import METRIC_NAME_MAX as MAX_NAME

Action = Literal["continue", "stop"]
FinalStatus = Literal["succeeded", "stopped", "failed"]

DEFAULT_URL = "http://127.0.0.1:8765"


class ScalerlError(Exception):
    """Base class of every error this client raises."""


class ServiceUnavailable(ScalerlError):
    """The service could not be reached, timed out, or answered 429/5xx: try again later. ``retry_after``: the
    seconds its ``Retry-After`` header asked for (None when it sent none)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        import time as _time

        seconds = when.timestamp() - _time.time()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


class ApiError(ScalerlError):
    """The service refused the request (4xx). ``status_code`` and ``detail`` say why."""

    def __init__(self, status_code: int, detail: Any, method: str, path: str) -> None:
        self.status_code = status_code
        self.detail = detail
        super().__init__(f"{method} {path}: {status_code} {_detail_text(detail)}")


def _detail_text(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
    return str(detail)


def _finite(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class Point:
    """One measurement: ``step`` (identifies the point), cumulative ``compute``, optional held-out ``pass_rate``
    in [0, 1], and other named finite ``metrics``."""

    step: int
    compute: float
    pass_rate: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def make(cls, step: Any, compute: Any, pass_rate: Any = None, metrics: Mapping[str, Any] | None = None) -> Point:
        """A checked point: raises ``ValueError`` for a bad step, compute or pass rate; drops metrics that are not
        finite numbers or whose names are too long, and keeps at most 64 (the service's limit)."""
        if isinstance(step, bool) or int(step) != step or int(step) < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        c = _finite(compute)
        if c is None or c < 0:
            raise ValueError(f"compute must be a finite number >= 0, got {compute!r}")
        p = None
        if pass_rate is not None:
            p = _finite(pass_rate)
            if p is None or not 0.0 <= p <= 1.0:
                raise ValueError(f"pass_rate must be a number in [0, 1], got {pass_rate!r}")
        clean: dict[str, float] = {}
        for name, value in (metrics or {}).items():
            v = _finite(value) if not isinstance(value, bool) else None
            if v is None or not 1 <= len(str(name)) <= MAX_NAME:
                continue
            if len(clean) >= MAX_METRICS:
                break
            clean[str(name)] = v
        return cls(int(step), c, p, clean)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"step": int(self.step), "compute": float(self.compute)}
        if self.pass_rate is not None:
            body["pass_rate"] = float(self.pass_rate)
        if self.metrics:
            body["metrics"] = {k: float(v) for k, v in self.metrics.items()}
        return body

    def merged(self, other: Point) -> Point:
        """This point updated with ``other`` (same step): the later compute/pass rate win, metrics are united."""
        metrics = {**self.metrics, **other.metrics}
        if len(metrics) > MAX_METRICS:
            metrics = dict(list(metrics.items())[:MAX_METRICS])
        pass_rate = other.pass_rate if other.pass_rate is not None else self.pass_rate
        return Point(self.step, max(self.compute, other.compute), pass_rate, metrics)


@dataclass(frozen=True)
class RunInfo:
    id: int
    name: str
    experiment_id: int
    status: str
    action: Action
    budget: float | None
    n_points: int
    last_step: int | None
    compute_used: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunInfo:
        return cls(
            id=int(d["id"]),
            name=str(d["name"]),
            experiment_id=int(d["experiment_id"]),
            status=str(d["status"]),
            action="stop" if d.get("action") == "stop" else "continue",
            budget=None if d.get("budget") is None else float(d["budget"]),
            n_points=int(d.get("n_points") or 0),
            last_step=None if d.get("last_step") is None else int(d["last_step"]),
            compute_used=float(d.get("compute_used") or 0.0),
        )


@dataclass(frozen=True)
class Forecast:
    """A fit of the run's curve: ``A`` (ceiling), ``B``, ``C_mid``, intervals ``ci`` (``full`` fits only) and
    ``predictions`` [(compute, mean, lo, hi)] at multiples of the budget. ``kind``: ``point`` (fast, on every
    batch) or ``full`` (with posterior intervals, computed off the request path)."""

    kind: str
    status: str
    message: str
    n_points: int
    A: float | None
    B: float | None
    C_mid: float | None
    R0: float | None = None
    ci: Mapping[str, list[float | None]] | None = None
    predictions: tuple[tuple[float, float | None, float | None, float | None], ...] = ()

    @classmethod
    def from_summary(cls, d: Mapping[str, Any]) -> Forecast:
        """From the ``fit`` of a metrics answer (``FitSummary``)."""
        return cls(str(d["kind"]), str(d["status"]), str(d["message"]), int(d["n_points"]), d["A"], d["B"], d["C_mid"])

    @classmethod
    def from_fit_out(cls, d: Mapping[str, Any]) -> Forecast:
        """From a fit snapshot (``FitOut``: ``fit``/``forecast`` of ``GET /runs/{id}``)."""
        f = d["fit"]
        preds = tuple(
            (float(p["compute"]), p.get("mean"), p.get("lo"), p.get("hi")) for p in f.get("predictions") or []
        )
        return cls(
            str(d["kind"]),
            str(f["status"]),
            str(f["message"]),
            int(f["n_points"]),
            f.get("A"),
            f.get("B"),
            f.get("C_mid"),
            f.get("R0"),
            f.get("ci"),
            preds,
        )


@dataclass(frozen=True)
class MetricsAnswer:
    """The answer to a metrics POST: what was stored and what the trainer should do."""

    run_id: int
    accepted: int
    duplicates: int
    rejected: tuple[dict[str, Any], ...]
    status: str
    action: Action
    #: The run's forecast as stored; it has seen this batch's evaluations only when ``fit_pending`` is false (the
    #: service refits off the request path, coalesced per run).
    fit: Forecast | None
    fit_pending: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MetricsAnswer:
        return cls(
            run_id=int(d["run_id"]),
            accepted=int(d["accepted"]),
            duplicates=int(d["duplicates"]),
            rejected=tuple(d.get("rejected") or ()),
            status=str(d["status"]),
            action="stop" if d.get("action") == "stop" else "continue",
            fit=Forecast.from_summary(d["fit"]) if d.get("fit") else None,
            fit_pending=bool(d.get("fit_pending", False)),
        )


def saved_config(url: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The server URL and token: the arguments, else ``SCALERL_URL``/``SCALERL_TOKEN``, else the credentials that
    ``scalerl server`` saved in ``$SCALERL_HOME/credentials.json`` (``~/.scalerl``), else the local default."""
    saved: dict[str, Any] = {}
    home = Path(os.environ.get("SCALERL_HOME") or Path.home() / ".scalerl")
    try:
        saved = json.loads((home / "credentials.json").read_text())
    except (OSError, ValueError):
        saved = {}
    chosen_url = url or os.environ.get("SCALERL_URL") or saved.get("url") or DEFAULT_URL
    chosen_token = token or os.environ.get("SCALERL_TOKEN") or saved.get("token")
    return str(chosen_url).rstrip("/"), None if chosen_token is None else str(chosen_token)


class Client:
    """One HTTP request per call against ``url`` with ``Authorization: Bearer token``.

    ``timeout`` (seconds) bounds every request (connect, read, write). Thread-safe (an ``httpx.Client``).
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url, self.token = saved_config(url, token)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- plumbing -------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The decoded JSON answer (``None`` for an empty one); raises :class:`ApiError` or
        :class:`ServiceUnavailable`."""
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise ServiceUnavailable(f"{method} {path}: no answer from {self.url} in time ({exc})") from exc
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(f"{method} {path}: cannot reach {self.url} ({exc})") from exc
        if resp.status_code == 429 or resp.status_code >= 500:
            raise ServiceUnavailable(
                f"{method} {path}: the service answered {resp.status_code}",
                retry_after(resp.headers.get("retry-after")),
            )
        if resp.status_code >= 400:
            try:
                detail = resp.json().get("detail")
            except ValueError:
                detail = resp.text
            raise ApiError(resp.status_code, detail, method, path)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as exc:
            raise ServiceUnavailable(f"{method} {path}: the answer is not JSON") from exc

    # ---- runs -----------------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = self.request("GET", "/healthz")
        return out

    def register_run(
        self,
        name: str,
        *,
        experiment_id: int | None = None,
        budget: float | None = None,
        task: str | None = None,
        model: str | None = None,
        seed: int | None = None,
        attach: bool = True,
        experiment: str | None = None,
        compute_unit: str | None = None,
    ) -> RunInfo:
        """Register a run; with ``attach`` (default) a run of that name already in the experiment is returned
        instead (a restarted trainer continues its run: points are idempotent by step). ``experiment`` names the
        experiment to join instead of its id: it is created if missing (:meth:`ensure_experiment`, measuring
        compute in ``compute_unit``, default ``gpu_hours``). A ``compute_unit`` given is sent with the run: the
        service refuses it (422) where it is not the experiment's, and never compares runs of different units."""
        if experiment is not None:
            if experiment_id is not None:
                raise ValueError("give experiment= (a name) or experiment_id=, not both")
            experiment_id = int(self.ensure_experiment(experiment, compute_unit=compute_unit or "gpu_hours")["id"])
        body: dict[str, Any] = {"name": name}
        pairs = (("experiment_id", experiment_id), ("task", task), ("model", model), ("seed", seed))
        for key, value in (*pairs, ("compute_unit", compute_unit)):
            if value is not None:
                body[key] = value
        if budget is not None:
            body["budget"] = float(budget)
        try:
            return RunInfo.from_json(self.request("POST", "/api/v1/runs", json=body))
        except ApiError as exc:
            if exc.status_code != 409 or not attach:
                raise
        exp_id = experiment_id if experiment_id is not None else self._experiment_id("default")
        found = self.find_run(name, exp_id) if exp_id is not None else None
        if found is None:
            raise ScalerlError(f"run {name!r} exists but could not be found in experiment {exp_id}")
        return found

    def find_run(self, name: str, experiment_id: int) -> RunInfo | None:
        offset = 0
        while True:
            page = self.request(
                "GET", "/api/v1/runs", params={"experiment_id": experiment_id, "limit": 1000, "offset": offset}
            )
            for r in page:
                if r["name"] == name:
                    return RunInfo.from_json(r)
            if len(page) < 1000:
                return None
            offset += len(page)

    def _experiment_id(self, name: str) -> int | None:
        exp = self.find_experiment(name)
        return None if exp is None else int(exp["id"])

    def find_experiment(self, name: str) -> dict[str, Any] | None:
        offset = 0
        while True:
            page = self.request("GET", "/api/v1/experiments", params={"limit": 500, "offset": offset})
            for e in page:
                if e["name"] == name:
                    return dict(e)
            if len(page) < 500:
                return None
            offset += len(page)

    def ensure_experiment(
        self,
        name: str,
        *,
        compute_unit: str = "gpu_hours",
        budget: float | None = None,
        task: str | None = None,
        model: str | None = None,
        description: str = "",
        exist_ok: bool = True,
    ) -> dict[str, Any]:
        """The experiment ``name`` for runs you train yourself (W&B's ``project``/``group``), created if missing
        with no grid document and no planned run: its compute unit, a default run ``budget`` and free-text
        ``task``/``model`` labels (its runs inherit them). An existing one is returned as it is, unless it records
        another compute unit (``ApiError`` 409), or ``exist_ok=False`` (409)."""
        body: dict[str, Any] = {"name": name, "compute_unit": compute_unit, "exist_ok": exist_ok}
        for key, value in (("task", task), ("model", model)):
            if value is not None:
                body[key] = value
        if budget is not None:
            body["budget"] = float(budget)
        if description:
            body["description"] = description
        out: dict[str, Any] = self.request("POST", "/api/v1/experiments/tracking", json=body)
        return out

    def find_run_by_name(self, name: str, experiment: str | None = None) -> RunInfo | None:
        """The run ``name`` of experiment ``experiment`` (default: the experiment ``default``); ``None`` if there
        is none (or no such experiment)."""
        exp_id = self._experiment_id(experiment or "default")
        return None if exp_id is None else self.find_run(name, exp_id)

    def create_experiment(self, document: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.request("POST", "/api/v1/experiments", json=dict(document))
        return out

    def get_run(self, run_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self.request("GET", f"/api/v1/runs/{int(run_id)}")
        return out

    def run_info(self, run_id: int) -> RunInfo:
        return RunInfo.from_json(self.get_run(run_id))

    def forecast(self, run_id: int) -> Forecast | None:
        """The run's latest fit with intervals (``full``), else its latest fast fit, else ``None``."""
        d = self.get_run(run_id)
        snap = d.get("forecast") or d.get("fit")
        return Forecast.from_fit_out(snap) if snap else None

    def post_points(self, run_id: int, points: Iterable[Point]) -> MetricsAnswer:
        body = {"points": [p.to_json() for p in points]}
        try:
            return MetricsAnswer.from_json(self.request("POST", f"/api/v1/runs/{int(run_id)}/metrics", json=body))
        except ApiError as exc:
            # Every point of the batch was rejected: the answer carries the usual per-point list under detail.
            if exc.status_code == 422 and isinstance(exc.detail, dict) and "rejected" in exc.detail:
                return MetricsAnswer.from_json(exc.detail)
            raise

    def get_points(self, run_id: int, *, after_step: int | None = None, limit: int = 10_000) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if after_step is not None:
            params["after_step"] = after_step
        out: list[dict[str, Any]] = self.request("GET", f"/api/v1/runs/{int(run_id)}/metrics", params=params)
        return out

    def report_status(self, run_id: int, status: str, reason: str) -> RunInfo:
        body = {"status": status, "reason": reason}
        return RunInfo.from_json(self.request("POST", f"/api/v1/runs/{int(run_id)}/status", json=body))

    def stop_run(self, run_id: int, reason: str = "requested by user") -> RunInfo:
        return RunInfo.from_json(self.request("POST", f"/api/v1/runs/{int(run_id)}/stop", json={"reason": reason}))
