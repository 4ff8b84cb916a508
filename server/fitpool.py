"""Where full fits (with posterior intervals) run: in a separate process when ``fit_workers`` > 0.

A full fit is pure numpy/scipy work of 5-70 ms; in its own process it does not hold the server's GIL, so requests
(and their fast point fits) are not slowed by it. Invariant: the result equals ``fit_run_curve(..., intervals=True)``
in-process (same function, pickled arguments).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from rl_core.scaling import CurveFit
from server.forecasting import Curve, fit_run_curve
from server.grid import FitSpec


def _full_fit(curve: Curve, spec: FitSpec) -> CurveFit:
    return fit_run_curve(curve, spec, intervals=True)


class FitPool:
    """Runs full fits in ``workers`` spawned processes, or in the calling thread when ``workers`` is 0."""

    def __init__(self, workers: int) -> None:
        self._pool = (
            ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            if workers > 0
            else None
        )

    def full_fit(self, curve: Curve, spec: FitSpec) -> CurveFit:
        if self._pool is None:
            return _full_fit(curve, spec)
        return self._pool.submit(_full_fit, curve, spec).result()

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
