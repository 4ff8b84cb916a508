"""Incremental reading of the engine's ``metrics.jsonl`` and the REST shape of its points.

Invariant: :meth:`JsonlTail.read` returns each complete line once per version of the file; a file that was replaced
(new inode) or truncated is read again from its start, so callers filter by step (steps only increase within a
version). A torn last line is kept until its newline arrives.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

MAX_METRICS = 64


class JsonlTail:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._pos = 0
        self._buf = b""

    def read(self) -> list[dict[str, Any]]:
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
        out = []
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                out.append(row)
        return out


def to_point(row: dict[str, Any]) -> dict[str, Any]:
    """The service's ``MetricPoint``: finite values only, at most ``MAX_METRICS`` metrics (curve metrics first)."""
    metrics = {
        str(k)[:100]: float(v)
        for k, v in (row.get("metrics") or {}).items()
        if isinstance(v, int | float) and math.isfinite(v)
    }
    keys = sorted(metrics, key=lambda k: (not k.startswith(("compute/", "eval/", "train/")), k))[:MAX_METRICS]
    raw = row.get("pass_rate")
    pass_rate = float(raw) if isinstance(raw, int | float) and math.isfinite(raw) else None
    return {
        "step": int(row["step"]),
        "compute": max(0.0, float(row.get("compute") or 0.0)),
        "pass_rate": pass_rate,
        "metrics": {k: metrics[k] for k in keys},
    }
