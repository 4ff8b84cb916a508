"""Timing helpers shared by the bench scripts (imported as a sibling module: ``bench/`` is ``sys.path[0]``)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_threads(threads: Iterable[threading.Thread]) -> float:
    """Start every thread, then wait for them all: the wall seconds from the first start to the last join."""
    threads = list(threads)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0
