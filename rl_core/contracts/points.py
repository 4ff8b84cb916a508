"""The metric point: what the engine writes to ``metrics.jsonl``, the worker reads back and the service stores.

A run emits one point per trainer step ``s`` (``s`` = optimiser steps completed; the step-0 point is the starting
checkpoint's evaluation). ``pass_rate`` is set only on evaluation steps. ``compute`` is the cumulative *training*
device-hours (generator + trainer; evaluation excluded); ``metrics`` holds any other named values.

Invariants:
- Steps strictly increase within a session of a run; ``(run, step)`` identifies a point on the service, so a
  re-sent point is harmless.
- :func:`to_rest` is the one REST shape of a point (an item of ``POST /api/v1/runs/{id}/metrics``): only finite
  values, ``compute`` clipped to ``[0, MAX_COMPUTE]``, and the metrics :func:`keep_metrics` keeps (finite numbers,
  names cut to ``METRIC_NAME_MAX`` characters, at most ``MAX_METRICS``: curve metrics first, ``compute/``,
  ``eval/``, ``train/``, then by name). ``scalerl.client.Point`` keeps its metrics by the same rule. The service's
  request schema enforces the same limits, read from here.
- :class:`MetricsTail` is the one reader of ``metrics.jsonl``: each complete line once per version of the file (a
  replaced or truncated file is read again from its start); a torn last line waits for its newline; a line that is
  not a point is skipped. :func:`read_points` reads a whole file with it.

Torch-free and server-free: the engine, the worker, the client and the service all import this module.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rl_core.contracts.records import as_json

#: At most this many named metrics per point on the service (the rest are dropped by :func:`to_rest`).
MAX_METRICS = 64
#: Metric names are at most this long on the service.
METRIC_NAME_MAX = 100
#: Compute values and budgets are at most this (GPU-hours or FLOPs alike), so sums and multiples stay finite.
MAX_COMPUTE = 1e30
#: The largest step the service stores.
MAX_STEP = 2**62
#: A final status's reason is at most this long on the service.
REASON_MAX = 2000
#: Metrics with these prefixes are kept first when a point has more than ``MAX_METRICS``.
CURVE_PREFIXES = ("compute/", "eval/", "train/")


@dataclass(frozen=True)
class MetricPoint:
    """One measurement of a run at trainer step ``step`` (values may be non-finite here; :func:`to_rest` drops
    those)."""

    step: int
    compute: float
    pass_rate: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    wall_time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The ``metrics.jsonl`` line of this point (NaN/inf written as JSON extensions)."""
        return as_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MetricPoint:
        """A point from its JSON line; ``ValueError`` when ``step`` is not an integer or a value is not a number.
        Non-numeric metric values are dropped."""
        step = data["step"]
        if not isinstance(step, int) or isinstance(step, bool):
            raise ValueError(f"step must be an integer, not {step!r}")
        compute = _number(data.get("compute", 0.0), "compute")
        raw = data.get("pass_rate")
        metrics = data.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise ValueError("metrics must be a mapping")
        return cls(
            step=step,
            compute=compute,
            pass_rate=None if raw is None else _number(raw, "pass_rate"),
            metrics={str(k): float(v) for k, v in metrics.items() if _is_number(v)},
            wall_time=_number(data.get("wall_time", 0.0), "wall_time"),
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any, what: str) -> float:
    if not _is_number(value):
        raise ValueError(f"{what} must be a number, not {value!r}")
    return float(value)


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


class PointLike(Protocol):
    """What :func:`to_rest` reads: a :class:`MetricPoint` or a ``scalerl.client.Point``."""

    @property
    def step(self) -> int: ...
    @property
    def compute(self) -> float: ...
    @property
    def pass_rate(self) -> float | None: ...
    @property
    def metrics(self) -> Mapping[str, Any]: ...


def keep_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The named metrics a point keeps on the service (the one rule; see the module invariants): numbers whose
    value is finite (a numpy scalar counts; booleans and text do not), names cut to ``METRIC_NAME_MAX`` characters
    (empty names dropped), at most ``MAX_METRICS`` of them, curve metrics (``CURVE_PREFIXES``) first, then by
    name."""
    kept: dict[str, float] = {}
    for name, value in metrics.items():
        number = _metric_value(value)
        key = str(name)[:METRIC_NAME_MAX]
        if number is not None and key:
            kept[key] = number
    if len(kept) <= MAX_METRICS:
        return kept
    keys = sorted(kept, key=lambda k: (not k.startswith(CURVE_PREFIXES), k))[:MAX_METRICS]
    return {k: kept[k] for k in keys}


def finite_float(value: Any) -> float | None:
    """``float(value)`` when that is a finite number, else None (never an exception)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _metric_value(value: Any) -> float | None:
    """A metric's value: a finite number; text (even numeric), bytes and bools are refused."""
    return None if isinstance(value, bool | str | bytes) else finite_float(value)


def to_rest(point: PointLike) -> dict[str, Any]:
    """The service's REST shape of ``point`` within the service's limits (see the module invariants): the one
    encoder of a point, used by the engine's ``HttpReporter`` and by ``scalerl.client`` (CLI, worker, Reporter)."""
    compute = point.compute if math.isfinite(point.compute) else 0.0
    return {
        "step": int(point.step),
        "compute": min(MAX_COMPUTE, max(0.0, float(compute))),
        "pass_rate": _finite(point.pass_rate),
        "metrics": keep_metrics(point.metrics),
    }


def metrics_path(run_id: int) -> str:
    """Where a run's points are posted (body ``{"points": [to_rest(p), ...]}``; a leased run adds ``lease_id``)."""
    return f"/api/v1/runs/{run_id}/metrics"


def status_path(run_id: int) -> str:
    """Where a run's final status is posted (body :func:`status_body`)."""
    return f"/api/v1/runs/{run_id}/status"


def status_body(status: str, reason: str, lease_id: str | None = None, *, release: bool = False) -> dict[str, Any]:
    """The final-status body: the reason cut to ``REASON_MAX`` (the status itself when empty); ``release``: a
    worker shutting down hands its leased run back (status ``lost``), not counted as a failed attempt."""
    body: dict[str, Any] = {"status": status, "reason": reason[:REASON_MAX] or status}
    if lease_id is not None:
        body["lease_id"] = lease_id
    if release:
        body["release"] = True
    return body


def parse_line(line: bytes | str) -> MetricPoint | None:
    """The point of one ``metrics.jsonl`` line, or None when the line is not a point."""
    try:
        row = json.loads(line)
        return MetricPoint.from_json(row) if isinstance(row, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


class MetricsTail:
    """Incremental reader of one ``metrics.jsonl`` (see the module invariants)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._pos = 0
        self._buf = b""

    def read(self, *, final: bool = False) -> list[MetricPoint]:
        """The points of the lines completed since the last call; with ``final`` also an unterminated last line
        (when it parses: the writer is done)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        if st.st_ino != self._inode or st.st_size < self._pos:
            self._inode, self._pos, self._buf = st.st_ino, 0, b""
        with self.path.open("rb") as fh:
            fh.seek(self._pos)
            data = fh.read()
        self._pos += len(data)
        *lines, self._buf = (self._buf + data).split(b"\n")
        if final and self._buf:
            lines.append(self._buf)
            self._buf = b""
        return [p for p in map(parse_line, lines) if p is not None]


def read_points(path: Path) -> list[MetricPoint]:
    """Every point of a ``metrics.jsonl`` file (none when it does not exist)."""
    return MetricsTail(path).read(final=True)
