"""Where fits run: in separate processes when ``fit_workers`` > 0 (full fits with posterior intervals in
``fit_workers`` processes, runs' point fits in one more of their own, so that a long grid fit never delays them).

A fit is pure numpy/scipy work (a point fit 5-90 ms, a full fit up to seconds for a grid); in its own process it does
not hold the server's GIL, and full fits, at a lower priority, take no CPU from requests. Invariant: the result equals
``fit_run_curve(...)`` in-process (same function, pickled arguments).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

from rl_core.scaling import CurveFit, fit_grid
from server.assess.forecasting import Curve, fit_run_curve
from server.lifecycle.grid import FitSpec

#: Full-fit workers run at a lower CPU priority: when CPUs are scarce, requests and point fits go first. The point-fit
#: worker keeps the server's priority: niced on a busy machine it got ~10 % of a core and runs' fits fell behind by
#: 20 s (bench/load.py), while on the request path they had always run at the server's priority.
WORKER_NICENESS = 10


#: How often a fit worker checks that the server that started it is still alive.
PARENT_POLL_SECONDS = 1.0


def _init_worker(parent: int, niceness: int = WORKER_NICENESS) -> None:
    """Lower the worker's priority, and end it when its server is gone: a ``kill -9`` of the server leaves no fit
    worker (nor, with them, multiprocessing's resource tracker) behind. The worker is re-parented when its parent
    dies, so a daemon thread watches ``getppid`` (PR_SET_PDEATHSIG would follow the spawning thread, not the server).
    """
    if niceness:
        os.nice(niceness)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _point_fit(curve: Curve, spec: FitSpec) -> CurveFit:
    return fit_run_curve(curve, spec, intervals=False)


def _full_fit(curve: Curve, spec: FitSpec) -> CurveFit:
    return fit_run_curve(curve, spec, intervals=True)


def _grid_fit(curves: list[Curve], spec: FitSpec) -> list[CurveFit]:
    return fit_grid([(c.compute, c.pass_rate) for c in curves], spec.options(), intervals=True, power_law=True)


class FitPool:
    """Runs full fits in ``workers`` spawned processes and point fits in one more, or every fit in the calling
    thread when ``workers`` is 0."""

    def __init__(self, workers: int) -> None:
        self._pool = _spawn(workers) if workers > 0 else None
        self._points = _spawn(1, niceness=0) if workers > 0 else None

    def point_fit(self, curve: Curve, spec: FitSpec) -> CurveFit:
        """A run's fast point fit (no intervals)."""
        if self._points is None:
            return _point_fit(curve, spec)
        return self._points.submit(_point_fit, curve, spec).result()

    def full_fit(self, curve: Curve, spec: FitSpec) -> CurveFit:
        if self._pool is None:
            return _full_fit(curve, spec)
        return self._pool.submit(_full_fit, curve, spec).result()

    def grid_fit(self, curves: list[Curve], spec: FitSpec) -> list[CurveFit]:
        """Full fits of an experiment's runs as one grid (:func:`rl_core.scaling.fit_grid`), in order."""
        if self._pool is None:
            return _grid_fit(curves, spec)
        return self._pool.submit(_grid_fit, curves, spec).result()

    def shutdown(self) -> None:
        for pool in (self._points, self._pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


def _spawn(workers: int, niceness: int = WORKER_NICENESS) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(os.getpid(), niceness),
    )
