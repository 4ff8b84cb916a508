"""Metric sinks behind one interface: JSONL and CSV files, the console, and an HTTP reporter.

The point itself, its REST shape and the ``metrics.jsonl`` reader are ``rl_core.contracts.points``.

The sink contract (``MetricSink``):
- ``write(point) -> "continue" | "stop"``: a sink may ask the engine to stop (the HTTP reporter relays the
  service's ``action``); the engine stops at the next step boundary, checkpoints, and closes with ``stopped``.
- ``truncate_after(step)``: on ``--resume`` from a checkpoint at ``step``, forget every point after it, so that
  the resumed run writes each step exactly once (no duplicated points, no gap).
- ``close(status, reason)``: the final status (``succeeded``, ``stopped`` or ``failed``) with a reason.

Invariant: steps written to a sink strictly increase within a session.
"""

from __future__ import annotations

import csv
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from rl_core.contracts.points import MetricPoint, metrics_path, read_points, status_body, status_path, to_rest
from rl_core.contracts.retry import backoff_delay, retry_after

SinkAction = Literal["continue", "stop"]
FinalStatus = Literal["succeeded", "stopped", "failed"]


class MetricSink(Protocol):
    def write(self, point: MetricPoint) -> SinkAction: ...

    def truncate_after(self, step: int) -> None: ...

    def close(self, status: FinalStatus, reason: str) -> None: ...


class JsonlSink:
    """One JSON object per line, flushed after each point."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = path.open("a", encoding="utf-8")

    def write(self, point: MetricPoint) -> SinkAction:
        self._fh.write(json.dumps(point.to_json(), allow_nan=True) + "\n")
        self._fh.flush()
        return "continue"

    def truncate_after(self, step: int) -> None:
        keep = [p for p in read_points(self.path) if p.step <= step]
        self._fh.close()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(p.to_json()) + "\n" for p in keep), encoding="utf-8")
        tmp.replace(self.path)
        self._fh = self.path.open("a", encoding="utf-8")

    def close(self, status: FinalStatus, reason: str) -> None:
        self._fh.close()


class CsvSink:
    """A CSV with columns step, compute, pass_rate, wall_time and one per metric; the file is rewritten when a
    new metric name appears (rows are few: one per step)."""

    BASE = ("step", "compute", "pass_rate", "wall_time")

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._rows: list[dict[str, str]] = []
        self._columns: list[str] = list(self.BASE)
        if path.exists():
            with path.open(newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                if reader.fieldnames:
                    self._columns = list(reader.fieldnames)
                self._rows = [dict(r) for r in reader]

    def _rewrite(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=self._columns, restval="")
            writer.writeheader()
            writer.writerows(self._rows)
        tmp.replace(self.path)

    def write(self, point: MetricPoint) -> SinkAction:
        row = {
            "step": str(point.step),
            "compute": repr(point.compute),
            "pass_rate": "" if point.pass_rate is None else repr(point.pass_rate),
            "wall_time": repr(point.wall_time),
        }
        row.update({k: repr(v) for k, v in point.metrics.items()})
        new = [k for k in row if k not in self._columns]
        self._rows.append(row)
        if new or not self.path.exists():
            self._columns.extend(sorted(new))
            self._rewrite()
        else:
            with self.path.open("a", newline="", encoding="utf-8") as fh:
                csv.DictWriter(fh, fieldnames=self._columns, restval="").writerow(row)
        return "continue"

    def truncate_after(self, step: int) -> None:
        self._rows = [r for r in self._rows if int(r["step"]) <= step]
        self._rewrite()

    def close(self, status: FinalStatus, reason: str) -> None:
        return None


class ConsoleSink:
    """The progress display: one line per point (every ``every``-th step, and every evaluation)."""

    def __init__(self, total_steps: int, *, every: int = 1, stream: IO[str] | None = None) -> None:
        self.total = total_steps
        self.every = max(1, every)
        self.stream = stream if stream is not None else sys.stdout

    def write(self, point: MetricPoint) -> SinkAction:
        if point.pass_rate is None and point.step % self.every:
            return "continue"
        m = point.metrics
        parts = [f"step {point.step:>5}/{self.total}"]
        if point.pass_rate is not None:
            parts.append(f"val {point.pass_rate:.3f}")
        for key, label, fmt in (
            ("train/reward_mean", "reward", "{:+.3f}"),
            ("train/pass_rate", "train", "{:.3f}"),
            ("train/truncation_rate", "trunc", "{:.2f}"),
            ("train/staleness_mean", "stale", "{:.2f}"),
            ("train/entropy", "ent", "{:.3f}"),
            ("throughput/samples_per_s", "samples/s", "{:.1f}"),
        ):
            if key in m:
                parts.append(f"{label} " + fmt.format(m[key]))
        parts.append(f"{point.compute * 3600:.0f} dev-s")
        parts.append(f"{point.wall_time:.0f}s")
        print(" | ".join(parts), file=self.stream, flush=True)
        return "continue"

    def truncate_after(self, step: int) -> None:
        print(f"resuming after step {step}", file=self.stream, flush=True)

    def close(self, status: FinalStatus, reason: str) -> None:
        print(f"run {status}: {reason}", file=self.stream, flush=True)


Sleep = Callable[[float], None]


class HttpReporter:
    """Posts points to the scalerl service and relays its stop action.

    Client contract (the service's REST API, ``server/routes/runs.py``; paths and bodies from
    ``rl_core.contracts.points``, the same code the worker uses):
    - ``POST metrics_path(run_id)`` with ``Authorization: Bearer <token>`` and body ``{"points": [to_rest(p)]}``;
      the answer's ``action`` is ``continue`` or ``stop``. Points are idempotent per (run, step), so a retried or
      re-sent point is harmless.
    - ``POST status_path(run_id)`` with ``status_body(status, reason)`` at the end.
    - With ``lease_id`` (a run executed under a worker's lease) every write carries the lease; a 409 (the lease was
      taken away) stops the run: nothing more is written.
    - Network errors, 429 and 5xx are retried ``retries`` times with exponential back-off
      (``backoff · 2^attempt`` seconds, capped at ``max_backoff``); points that still failed stay queued and are
      re-sent with the next point and at ``close``. Other 4xx answers are not retried (logged to stderr).
    """

    def __init__(
        self,
        base_url: str,
        run_id: int,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        lease_id: str | None = None,
        sleep: Sleep = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.run_id = run_id
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.lease_id = lease_id
        self.lease_lost = False
        self._sleep = sleep
        self._pending: list[dict[str, Any]] = []
        self.stop_requested = False
        self.last_error: str | None = None

    def _request(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST with retries; the decoded answer, or None when it finally failed."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        for attempt in range(self.retries + 1):
            hint: float | None = None
            req = urllib.request.Request(self.base_url + path, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    answer: dict[str, Any] = json.loads(resp.read() or b"{}")
                    return answer
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:500]
                hint = retry_after(exc.headers.get("Retry-After") if exc.headers is not None else None)
                self.last_error = f"HTTP {exc.code} from {path}: {detail}"
                if exc.code == 409 and self.lease_id is not None:
                    self.lease_lost = self.stop_requested = True
                if exc.code != 429 and exc.code < 500:
                    print(f"warning: metrics reporter: {self.last_error}", file=sys.stderr)
                    return None
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
            if attempt < self.retries:  # the service's Retry-After (a 503 while its database restarts), capped
                self._sleep(backoff_delay(attempt + 1, self.backoff, self.max_backoff, hint))
        print(f"warning: metrics reporter gave up after {self.retries + 1} tries: {self.last_error}", file=sys.stderr)
        return None

    def flush(self) -> SinkAction:
        if self.lease_lost:
            self._pending = []
        if not self._pending:
            return "stop" if self.stop_requested else "continue"
        path = metrics_path(self.run_id)
        if self.lease_id is not None:
            path += "?" + urllib.parse.urlencode({"lease_id": self.lease_id})
        answer = self._request(path, {"points": self._pending})
        if answer is not None:
            self._pending = []
            if answer.get("action") == "stop":
                self.stop_requested = True
        return "stop" if self.stop_requested else "continue"

    def write(self, point: MetricPoint) -> SinkAction:
        self._pending.append(to_rest(point))
        return self.flush()

    def truncate_after(self, step: int) -> None:
        self._pending = [p for p in self._pending if p["step"] <= step]

    def close(self, status: FinalStatus, reason: str) -> None:
        self.flush()
        if not self.lease_lost:
            self._request(status_path(self.run_id), status_body(status, reason, self.lease_id))


class MultiSink:
    """Fan-out to several sinks; ``write`` answers ``stop`` if any sink does and enforces increasing steps."""

    def __init__(self, sinks: Sequence[MetricSink]) -> None:
        self.sinks = list(sinks)
        self._last_step: int | None = None

    def write(self, point: MetricPoint) -> SinkAction:
        if self._last_step is not None and point.step <= self._last_step:
            raise ValueError(f"metric steps must increase: {point.step} after {self._last_step}")
        self._last_step = point.step
        action: SinkAction = "continue"
        for sink in self.sinks:
            if sink.write(point) == "stop":
                action = "stop"
        return action

    def truncate_after(self, step: int) -> None:
        self._last_step = step
        for sink in self.sinks:
            sink.truncate_after(step)

    def close(self, status: FinalStatus, reason: str) -> None:
        for sink in self.sinks:
            try:
                sink.close(status, reason)
            except Exception as exc:  # a sink failing to close must not hide the run's own status
                print(f"warning: closing {type(sink).__name__} failed: {exc}", file=sys.stderr)
