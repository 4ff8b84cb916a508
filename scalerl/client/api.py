"""The request layer: typed bodies and answers of the REST API (docs/api.md) and one call per request.

Contract: every method either returns a typed answer or raises. :class:`ApiError` (a 4xx: the request itself is
wrong or not allowed; retrying it changes nothing) carries the status code and the server's ``detail``;
:class:`ServiceUnavailable` (no connection, a timeout, a 429 or a 5xx) is worth retrying later. Numbers are sent
as real JSON numbers (``int`` steps, ``float`` compute and values), never strings.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from rl_core.contracts.points import (
    PointLike,
    finite_float,
    keep_metrics,
    metrics_path,
    status_body,
    status_path,
    to_rest,
)
from rl_core.contracts.retry import retry_after

Action = Literal["continue", "stop"]
#: What registering under a name that exists does (``Client.register_run``).
ResumePolicy = Literal["auto", "allow", "must", "never"]
FinalStatus = Literal["succeeded", "stopped", "failed"]

DEFAULT_URL = "http://127.0.0.1:8765"
#: The longest one ``GET /api/v1/jobs/{id}?wait=`` of :meth:`Client.job` waits on the service (which allows 60 s).
JOB_WAIT_S = 30.0


class ScalerlError(Exception):
    """Base class of every error this client raises."""


class ServiceUnavailable(ScalerlError):
    """The service could not be reached, timed out, or answered 429/5xx: try again later. ``retry_after``: the
    seconds its ``Retry-After`` header asked for (None when it sent none)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ApiError(ScalerlError):
    """The service refused the request (4xx). ``status_code`` and ``detail`` say why."""

    def __init__(self, status_code: int, detail: Any, method: str, path: str) -> None:
        self.status_code = status_code
        self.detail = detail
        super().__init__(f"{method} {path}: {status_code} {detail_text(detail)}")


def detail_text(detail: Any) -> str:
    """A 4xx's ``detail`` as one line: each validation problem with the field it is about (``p_stop: Input should
    be less than 1``)."""
    if isinstance(detail, list):
        return "; ".join(_problem_text(d) for d in detail)
    return str(detail)


def _problem_text(problem: Any) -> str:
    if not isinstance(problem, dict):
        return str(problem)
    where = [str(p) for p in problem.get("loc") or () if p not in ("body", "query", "path")]
    msg = str(problem.get("msg", problem))
    return f"{'.'.join(where)}: {msg}" if where else msg


@dataclass(frozen=True)
class Point:
    """One measurement: ``step`` (identifies the point), cumulative ``compute``, optional held-out ``pass_rate``
    in [0, 1], and other named finite ``metrics`` (kept by ``rl_core.contracts.points.keep_metrics``, the rule the
    service's limits are read from; :meth:`to_json` is ``to_rest``, the one REST shape of a point)."""

    step: int
    compute: float
    pass_rate: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def make(cls, step: Any, compute: Any, pass_rate: Any = None, metrics: Mapping[str, Any] | None = None) -> Point:
        """A checked point: raises ``ValueError`` for a bad step, compute or pass rate; its metrics are those
        ``keep_metrics`` keeps (finite numbers, names cut to 100 characters, at most 64: curve metrics first)."""
        if isinstance(step, bool) or int(step) != step or int(step) < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        c = finite_float(compute)
        if c is None or c < 0:
            raise ValueError(f"compute must be a finite number >= 0, got {compute!r}")
        p = None
        if pass_rate is not None:
            p = finite_float(pass_rate)
            if p is None or not 0.0 <= p <= 1.0:
                raise ValueError(f"pass_rate must be a number in [0, 1], got {pass_rate!r}")
        return cls(int(step), c, p, keep_metrics(metrics or {}))

    def to_json(self) -> dict[str, Any]:
        """The point as the service receives it (``to_rest``)."""
        return to_rest(self)

    def merged(self, other: Point) -> Point:
        """This point updated with ``other`` (same step): the later compute/pass rate win, metrics are united (and
        kept by the same rule)."""
        metrics = keep_metrics({**self.metrics, **other.metrics})
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
    key: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()

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
            key=None if d.get("key") is None else str(d["key"]),
            config=dict(d.get("config") or {}),
            summary=dict(d.get("summary") or {}),
            tags=tuple(d.get("tags") or ()),
        )

    @classmethod
    def from_heartbeat(cls, d: Mapping[str, Any], run_id: int) -> RunInfo:
        """The fields a heartbeat answer carries (the rest unknown: empty)."""
        return cls(int(d.get("run_id", run_id)), "", 0, str(d["status"]),
                   "stop" if d.get("action") == "stop" else "continue", None, 0, None, 0.0)  # fmt: skip


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


def current_forecast(point: Mapping[str, Any] | None, full: Mapping[str, Any] | None) -> Forecast | None:
    """Of a run's latest fast fit and latest fit with intervals (``FitOut`` snapshots), the one that has seen more
    points; the one with intervals on a tie. A fit with intervals computed before the run's last points is older
    than the fast fit that saw them, and is not the run's forecast any more."""
    if not point and not full:
        return None
    if not full:
        return Forecast.from_fit_out(point)  # type: ignore[arg-type]
    if not point:
        return Forecast.from_fit_out(full)
    seen = (int(point["fit"]["n_points"]), int(full["fit"]["n_points"]))
    return Forecast.from_fit_out(full if seen[1] >= seen[0] else point)


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
    #: Points rejected by the request (``rejected`` lists the first 50 of them).
    n_rejected: int = 0

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
            n_rejected=int(d.get("n_rejected") or len(d.get("rejected") or ())),
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
    """One HTTP request per call against ``url`` with ``Authorization: Bearer token``: the one client of the REST
    API, used by the Reporter, the CLI and the worker (its lease calls: :meth:`claim_run`, :meth:`renew_lease`, and
    ``lease_id=`` on :meth:`post_points` and :meth:`report_status`). Callers that retry use
    :mod:`scalerl.client.retry`.

    ``timeout`` (seconds) bounds every request (connect, read, write). ``from_environment`` (default): what is not
    given is read from the environment and the saved credentials (:func:`saved_config`); off, the URL and token
    are exactly the arguments (the worker's settings already resolved them). Thread-safe (an ``httpx.Client``).
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        from_environment: bool = True,
    ) -> None:
        if from_environment:
            self.url, self.token = saved_config(url, token)
        else:
            self.url, self.token = (url or DEFAULT_URL).rstrip("/"), token or None
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
        except RuntimeError as exc:  # httpx: "the client has been closed"
            raise ScalerlError(f"{method} {path}: {exc}") from exc
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

    def _pages(self, path: str, params: Mapping[str, Any], size: int) -> Iterator[dict[str, Any]]:
        """The rows of a paged listing (``limit``/``offset``), page after page, until a short page."""
        offset = 0
        while True:
            page = self.request("GET", path, params={**params, "limit": size, "offset": offset})
            yield from page
            if len(page) < size:
                return
            offset += len(page)

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
        resume: ResumePolicy = "auto",
        experiment: str | None = None,
        compute_unit: str | None = None,
        heartbeat_seconds: float | None = None,
        config: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        notes: str | None = None,
        key: str | None = None,
    ) -> RunInfo:
        """Register the run ``name``; ``key``: its identity (W&B's run id: letters, digits, ``_-.``, at most 64),
        which names the run before its name does (see docs/integrations.md, "Resuming"). ``resume`` says what a key
        or name that exists means (as W&B's ``resume``): ``"auto"`` (default) continues the run of that key; without
        a key, the run of that name while it is queued, running, stopping or ``lost`` and no trainer is alive in it
        (none heard from within its promised heartbeats: a crashed one), else a new run ``<name>-2``, ``<name>-3``,
        ... (the answer's ``name`` says which); ``"allow"`` continues it whatever its status (an ended run is
        reopened: its next points start a new attempt); ``"must"`` as ``"allow"`` but :class:`ApiError` 404 when
        there is none; ``"never"`` :class:`ApiError` 409 when it exists. ``experiment`` names the experiment to join
        instead of its id: it is created if missing (:meth:`ensure_experiment`, measuring compute in
        ``compute_unit``, default ``gpu_hours``). A ``compute_unit`` given is sent with the run: the service refuses
        it (422) where it is not the experiment's. ``heartbeat_seconds``: how often this client promises a sign of
        life (a run silent for several of them becomes ``lost``); ``config``/``tags``/``notes``: the run's
        description (a new run only; :meth:`update_run` changes them)."""
        if resume not in ("auto", "allow", "must", "never"):
            raise ValueError(f"resume must be one of 'auto', 'allow', 'must', 'never', got {resume!r}")
        if experiment is not None:
            if experiment_id is not None:
                raise ValueError("give experiment= (a name) or experiment_id=, not both")
            experiment_id = int(self.ensure_experiment(experiment, compute_unit=compute_unit or "gpu_hours")["id"])
        body: dict[str, Any] = {"name": name, "resume": resume}
        pairs = (("experiment_id", experiment_id), ("task", task), ("model", model), ("seed", seed), ("key", key))
        for key, value in (*pairs, ("compute_unit", compute_unit), ("notes", notes)):
            if value is not None:
                body[key] = value
        if budget is not None:
            body["budget"] = float(budget)
        if heartbeat_seconds is not None:
            body["heartbeat_seconds"] = float(heartbeat_seconds)
        if config:
            body["config"] = dict(config)
        if tags is not None:
            body["tags"] = list(tags)
        return RunInfo.from_json(self.request("POST", "/api/v1/runs", json=body))

    def update_run(
        self,
        run_id: int,
        *,
        config: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        notes: str | None = None,
        summary: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Change a run's description: ``config`` and ``summary`` (the run's outcome as you report it, W&B's
        ``run.summary``) are merged key by key (``None`` removes a key), ``tags`` and ``notes`` replace the stored
        ones."""
        body: dict[str, Any] = {}
        if config is not None:
            body["config"] = dict(config)
        if summary is not None:
            body["summary"] = dict(summary)
        if tags is not None:
            body["tags"] = list(tags)
        if notes is not None:
            body["notes"] = notes
        out: dict[str, Any] = self.request("PATCH", f"/api/v1/runs/{int(run_id)}", json=body)
        return out

    def heartbeat(self, run_id: int, every_seconds: float | None = None) -> RunInfo:
        """Say that this run's trainer (one of its own, not a worker's lease) is alive; the answer has its status
        and the action. :class:`ApiError` 409 when the run has ended or is a worker's."""
        body: dict[str, Any] = {} if every_seconds is None else {"heartbeat_seconds": float(every_seconds)}
        answer = self.request("POST", f"/api/v1/runs/{int(run_id)}/heartbeat", json=body)
        return self.run_info(int(run_id)) if answer is None else RunInfo.from_heartbeat(answer, run_id)

    def resume_run(self, run_id: int, reason: str = "resumed by user") -> RunInfo:
        """Queue a stopped or succeeded run again (its trainer's next points start it)."""
        return self.requeue_run(run_id, "resume", reason)

    def retry_run(self, run_id: int, reason: str = "retried by user") -> RunInfo:
        """Queue a failed or lost run again (its next start is a new attempt)."""
        return self.requeue_run(run_id, "retry", reason)

    def requeue_run(self, run_id: int, how: Literal["resume", "retry"], reason: str) -> RunInfo:
        """Queue a run again: ``resume`` (a stopped or succeeded run) or ``retry`` (a failed or lost one)."""
        if how not in ("resume", "retry"):
            raise ValueError(f"how must be 'resume' or 'retry', got {how!r}")
        return RunInfo.from_json(self.request("POST", f"/api/v1/runs/{int(run_id)}/{how}", json={"reason": reason}))

    def list_runs(
        self,
        experiment_id: int | None = None,
        *,
        status: str | None = None,
        tags: Iterable[str] | None = None,
        config: Mapping[str, Any] | None = None,
        summary: Mapping[str, Any] | None = None,
        sort: str | None = None,
    ) -> list[RunInfo]:
        """Every run (of one experiment, of one status), oldest first, or in ``sort``'s order: a run column (``id``,
        ``name``, ``created_at``, ``compute_used``, ``status``, ...) or ``config.<key>``/``summary.<key>``, ``-``
        first for descending, runs without the value last. ``tags``: runs having every one of them. ``config`` /
        ``summary``: runs whose config / summary holds each key (dotted: into nested values) with that value, compared
        as the stored value's type says (``{"lr": 1e-3}`` matches 0.001 stored as a number, ``{"use_kl": True}`` a
        boolean). A malformed filter or sort is an :class:`ApiError` 422 naming what is allowed."""
        params: dict[str, Any] = {}
        if experiment_id is not None:
            params["experiment_id"] = int(experiment_id)
        if status is not None:
            params["status"] = status
        if tags is not None:
            params["tag"] = [tags] if isinstance(tags, str) else list(tags)
        for kind, values in (("config", config), ("summary", summary)):
            for key, value in (values or {}).items():
                # JSON's spelling: true/false, numbers as Python repr()s them (1e-06 reads back as the same float)
                params[f"{kind}.{key}"] = json.dumps(value) if isinstance(value, bool | int | float) else str(value)
        if sort is not None:
            params["sort"] = sort
        return [RunInfo.from_json(r) for r in self._pages("/api/v1/runs", params, 1000)]

    def list_experiments(self) -> list[dict[str, Any]]:
        """Every experiment, oldest first."""
        return [dict(e) for e in self._pages("/api/v1/experiments", {}, 500)]

    def find_run(self, name: str, experiment_id: int) -> RunInfo | None:
        for r in self._pages("/api/v1/runs", {"experiment_id": experiment_id}, 1000):
            if r["name"] == name:
                return RunInfo.from_json(r)
        return None

    def _experiment_id(self, name: str) -> int | None:
        exp = self.find_experiment(name)
        return None if exp is None else int(exp["id"])

    def find_experiment(self, name: str) -> dict[str, Any] | None:
        for e in self._pages("/api/v1/experiments", {}, 500):
            if e["name"] == name:
                return dict(e)
        return None

    def get_experiment(self, experiment_id: int, *, runs_limit: int | None = None) -> dict[str, Any]:
        """The experiment ``experiment_id`` (its document and, unless ``runs_limit`` caps them, its runs)."""
        params = None if runs_limit is None else {"runs_limit": int(runs_limit)}
        out: dict[str, Any] = self.request("GET", f"/api/v1/experiments/{int(experiment_id)}", params=params)
        return out

    def lookup_experiment(self, ref: str) -> dict[str, Any] | None:
        """The experiment ``ref`` names: an id (digits; :class:`ApiError` 404 when there is none), else a name
        (``None`` when there is none)."""
        return self.get_experiment(int(ref)) if ref.isdigit() else self.find_experiment(ref)

    def verdict(self, experiment_id: int, *, decide_early: bool = False) -> dict[str, Any]:
        """The experiment's verdict (``GET /experiments/{id}/verdict``: decided, finished, best run, ranking)."""
        params = {"decide_early": "true"} if decide_early else None
        out: dict[str, Any] = self.request("GET", f"/api/v1/experiments/{int(experiment_id)}/verdict", params=params)
        return out

    def scorecard(self, experiment_id: int) -> dict[str, Any]:
        """What the decisions did on the grid (``GET /experiments/{id}/scorecard``: compute saved, when the verdict
        was first decided and whether it changed, forecasts against outcomes, alerts; ``summary`` in one line)."""
        out: dict[str, Any] = self.request("GET", f"/api/v1/experiments/{int(experiment_id)}/scorecard")
        return out

    def refresh_recommendations(self, experiment_id: int, *, wait: float = 300.0) -> dict[str, Any]:
        """Assess the experiment now (``POST /experiments/{id}/recommendations``: a job the service runs off the
        request) and wait up to ``wait`` seconds for it to finish: the job (:meth:`job`), whose ``result`` holds the
        stored recommendations once ``succeeded``. While the experiment's job is queued or running, that job."""
        job: dict[str, Any] = self.request("POST", f"/api/v1/experiments/{int(experiment_id)}/recommendations")
        return self.job(str(job["job_id"]), wait=wait)

    def job(self, job_id: str, *, wait: float = 0.0) -> dict[str, Any]:
        """A job (``GET /api/v1/jobs/{id}``): ``status`` (queued, running, succeeded, failed), ``result`` or
        ``error``. With ``wait``, returns once it finished or ``wait`` seconds passed (each request waits on the
        service, at most :data:`JOB_WAIT_S`)."""
        deadline = time.monotonic() + wait
        while True:
            left = max(0.0, deadline - time.monotonic())
            step = min(left, JOB_WAIT_S)
            out: dict[str, Any] = self.request(
                "GET", f"/api/v1/jobs/{job_id}", params={"wait": round(step, 3)}, timeout=step + 10.0
            )
            if out["status"] in ("succeeded", "failed") or left <= step:
                return out

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
        policy: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The experiment ``name`` for runs you train yourself (W&B's ``project``/``group``), created if missing
        with no grid document and no planned run: its compute unit, a default run ``budget`` and free-text
        ``task``/``model`` labels (its runs inherit them). An existing one is returned as it is, unless it records
        another compute unit (``ApiError`` 409), or ``exist_ok=False`` (409). ``policy``: how its recommendations are
        used (e.g. ``{"mode": "auto_stop"}``) for a new experiment; :meth:`set_policy` changes it later."""
        body: dict[str, Any] = {"name": name, "compute_unit": compute_unit, "exist_ok": exist_ok}
        for key, value in (("task", task), ("model", model)):
            if value is not None:
                body[key] = value
        if budget is not None:
            body["budget"] = float(budget)
        if description:
            body["description"] = description
        if policy is not None:
            body["policy"] = dict(policy)
        out: dict[str, Any] = self.request("POST", "/api/v1/experiments/tracking", json=body)
        return out

    def set_policy(self, experiment_id: int, policy: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the experiment's decision policy (``mode``: ``recommend``/``auto_stop``, and the numbers of
        docs/decisions.md; the rest take their defaults)."""
        out: dict[str, Any] = self.request("PUT", f"/api/v1/experiments/{int(experiment_id)}/policy", json=dict(policy))
        return out

    def find_run_by_name(self, name: str, experiment: str | None = None) -> RunInfo | None:
        """The run ``name`` of experiment ``experiment``; without one, the run of that name wherever it is, when
        only one experiment has one (several: :class:`ScalerlError` naming them). ``None`` if there is none (or no
        such experiment)."""
        if experiment is not None:
            exp_id = self._experiment_id(experiment)
            return None if exp_id is None else self.find_run(name, exp_id)
        page = self.request("GET", "/api/v1/runs", params={"name": name, "limit": 100})
        found = [RunInfo.from_json(r) for r in page]
        if len(found) > 1:
            where = ", ".join(str(r.experiment_id) for r in found)
            raise ScalerlError(f"{len(found)} experiments have a run named {name!r} (ids {where}): name one")
        return found[0] if found else None

    def create_experiment(
        self,
        document: Mapping[str, Any] | bytes,
        *,
        content_type: str = "application/yaml",
        dry_run: bool = False,
        runs_limit: int | None = None,
    ) -> dict[str, Any]:
        """Submit a grid document: a mapping (sent as JSON) or the bytes of a file (YAML or JSON, as
        ``content_type`` says). ``dry_run``: expanded, not stored. ``runs_limit``: at most that many runs in the
        answer (0: none, for a big grid)."""
        params: dict[str, str] = {"dry_run": "true"} if dry_run else {}
        if runs_limit is not None:
            params["runs_limit"] = str(int(runs_limit))
        if isinstance(document, bytes):
            body: dict[str, Any] = {"content": document, "headers": {"Content-Type": content_type}}
        else:
            body = {"json": dict(document)}
        out: dict[str, Any] = self.request("POST", "/api/v1/experiments", params=params or None, **body)
        return out

    def get_run(self, run_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self.request("GET", f"/api/v1/runs/{int(run_id)}")
        return out

    def run_info(self, run_id: int) -> RunInfo:
        return RunInfo.from_json(self.get_run(run_id))

    def forecast(self, run_id: int, *, wait: float = 0.0) -> Forecast | None:
        """The run's current forecast: of its latest fit with intervals (``full``) and its latest fast fit, the one
        that has seen more points (the full one on a tie); ``None`` before any fit. With ``wait`` > 0, waits up to
        that many seconds while the service says points are stored but not fitted yet (``fit_pending``)."""
        deadline = time.monotonic() + wait
        while True:
            d = self.get_run(run_id)
            if not d.get("fit_pending") or time.monotonic() >= deadline:
                break
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
        return current_forecast(d.get("fit"), d.get("forecast"))

    def post_points(self, run_id: int, points: Iterable[PointLike], *, lease_id: str | None = None) -> MetricsAnswer:
        """Store points (:class:`Point`, or the engine's ``MetricPoint``; each encoded by ``to_rest``) of the run;
        ``lease_id``: the worker's lease of a leased run. A batch refused whole (422) is answered as rejected."""
        body = {"points": [to_rest(p) for p in points]}
        params = None if lease_id is None else {"lease_id": lease_id}
        try:
            answer = self.request("POST", metrics_path(int(run_id)), params=params, json=body)
            return MetricsAnswer.from_json(answer)
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

    def report_status(
        self, run_id: int, status: str, reason: str, *, lease_id: str | None = None, release: bool = False
    ) -> RunInfo:
        """Report how the run ended (the reason cut to the service's limit); ``lease_id``: the worker's lease;
        ``release``: the worker is shutting down and hands the run back (``lost``, not a failed attempt)."""
        body = status_body(status, reason, lease_id, release=release)
        return RunInfo.from_json(self.request("POST", status_path(int(run_id)), json=body))

    # ---- a worker's lease -----------------------------------------------------------------------------------

    def claim_run(self, worker: str, lease_seconds: float) -> dict[str, Any] | None:
        """The lease on the oldest queued run (``{"run", "lease_id", "lease_expires_at"}``), or None when nothing
        is queued."""
        answer = self.request("POST", "/api/v1/runs/claim", json={"worker": worker, "lease_seconds": lease_seconds})
        return answer if isinstance(answer, dict) else None

    def renew_lease(self, run_id: int, lease_id: str, lease_seconds: float) -> RunInfo:
        """Renew the worker's lease on the run; the answer has its status and the action. :class:`ApiError` 409
        when the lease is no longer this worker's."""
        body = {"lease_id": lease_id, "lease_seconds": lease_seconds}
        return RunInfo.from_heartbeat(self.request("POST", f"/api/v1/runs/{int(run_id)}/heartbeat", json=body), run_id)

    def stop_run(self, run_id: int, reason: str = "requested by user") -> RunInfo:
        return RunInfo.from_json(self.request("POST", f"/api/v1/runs/{int(run_id)}/stop", json={"reason": reason}))
