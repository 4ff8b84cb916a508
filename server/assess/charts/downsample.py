"""Server-side downsampling for charts: Largest-Triangle-Three-Buckets keeps a curve's visual shape with few points.

Invariant: the first and the last point are always kept and the chosen indices are strictly increasing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

IntArray = np.ndarray[Any, np.dtype[np.int64]]
FloatArray = np.ndarray[Any, np.dtype[np.float64]]


def lttb(x: FloatArray, y: FloatArray, n_out: int) -> IntArray:
    """Indices of at most ``n_out`` points of (x, y) chosen by LTTB (x sorted; pass log x for log axes)."""
    n = int(x.size)
    if n <= n_out or n <= 2:
        return np.arange(n, dtype=np.int64)
    if n_out < 3:
        return np.array([0, n - 1], dtype=np.int64)[: max(n_out, 1)]
    edges = np.linspace(1, n - 1, n_out - 1).astype(np.int64)
    out = np.empty(n_out, dtype=np.int64)
    out[0], out[-1] = 0, n - 1
    a = 0
    for i in range(n_out - 2):
        lo, hi = int(edges[i]), max(int(edges[i + 1]), int(edges[i]) + 1)
        nxt_lo, nxt_hi = hi, (int(edges[i + 2]) if i + 2 < edges.size else n)
        cx = float(np.mean(x[nxt_lo:nxt_hi])) if nxt_hi > nxt_lo else float(x[-1])
        cy = float(np.mean(y[nxt_lo:nxt_hi])) if nxt_hi > nxt_lo else float(y[-1])
        seg_x, seg_y = x[lo:hi], y[lo:hi]
        area = np.abs((x[a] - cx) * (seg_y - y[a]) - (x[a] - seg_x) * (cy - y[a]))
        a = lo + int(np.argmax(area))
        out[i + 1] = a
    return np.unique(out)


def rounded(values: Any) -> list[float]:
    """Values to 6 significant digits (far below what a chart shows) so that JSON answers stay small."""
    return [float(f"{float(v):.6g}") for v in values]


def log_x(x: FloatArray) -> FloatArray:
    """x on a log scale for LTTB areas (non-positive compute sits at the smallest positive value)."""
    positive = x[x > 0]
    floor = float(positive.min()) if positive.size else 1.0
    return np.asarray(np.log(np.maximum(x, floor)), dtype=np.float64)


def per_run_budget(n_runs: int, total: int, cap: int, floor: int = 30) -> int:
    """Points per run so that a chart of ``n_runs`` runs carries about ``total`` points in all."""
    return max(floor, min(cap, total // max(n_runs, 1)))
