"""Full fits with intervals, keyed by exactly what they read; the one place an assessment's fits come from.

Invariants: a fit is reused only while its key (:func:`fit_key`: the run's pass-rate point count and the fit
options) is unchanged; a grid-fitted experiment's runs share one joint fit, keyed by every run's key; fits of
arbitrary points (the hold rule's prefixes) are memoised on the points. Bounded and thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit
from server.assess.fitpool import FitPool
from server.assess.forecasting import Curve, load_curve
from server.assess.runread import experiment_runs
from server.lifecycle.grid import FitSpec
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Run


def fit_key(run: Run, spec: ExperimentSpec) -> tuple[object, ...]:
    """Identifies exactly what a run's full fit reads: its pass-rate points (append-only and never changed, so
    their count identifies them) and the fit options. Points carrying only other metrics leave it unchanged."""
    return (run.curve_points, *spec.fit.cache_key())


def decision_key(run: Run, spec: ExperimentSpec) -> tuple[object, ...]:
    """Identifies the points the experiment's decision reads of a run: its fit's inputs, plus its logged metrics
    when the policy has guard rules on them. (Status and budget changes do not trigger a new decision by
    themselves: the run's next points do.)"""
    guarded = bool(spec.policy.guards)
    return (*fit_key(run, spec), *((run.n_points, run.last_step) if guarded else ()))


#: Experiments with more runs than this are fitted run by run (a joint fit of thousands of runs on every point
#: would cost seconds; the shape shrinkage gains nothing there).
GRID_MAX_RUNS = 64


def grid_fitted(spec: ExperimentSpec, n_runs: int) -> bool:
    """An experiment's runs are fitted as one grid (they share a base checkpoint and an evaluation set), except in
    the default experiment, which collects runs registered on their own, and above :data:`GRID_MAX_RUNS`."""
    return not spec.is_default and 2 <= n_runs <= GRID_MAX_RUNS


class FitCache:
    """Full fits (with intervals) keyed by what they read (:func:`fit_key`); bounded, thread-safe.

    A run of a grid-fitted experiment gets its fit from the experiment's joint fit (``rl_core.scaling.fit_grid``),
    refitted when any run's points change; other runs are fitted on their own (``fit_curve``)."""

    def __init__(self, pool: FitPool | None = None, size: int = 4096) -> None:
        self._pool = pool or FitPool(0)
        self._size = size
        self._lock = threading.Lock()
        self._fits: OrderedDict[int, tuple[tuple[Any, ...], CurveFit]] = OrderedDict()
        self._grids: OrderedDict[int, tuple[tuple[Any, ...], dict[int, CurveFit]]] = OrderedDict()
        self._prefix: OrderedDict[tuple[Any, ...], list[CurveFit]] = OrderedDict()

    def _remember(self, store: OrderedDict[Any, Any], key: Any, value: Any, size: int) -> None:
        with self._lock:
            store[key] = value
            store.move_to_end(key)
            while len(store) > size:
                store.popitem(last=False)

    def get(
        self,
        session: Session,
        run: Run,
        spec: ExperimentSpec,
        runs: Sequence[Run] | None = None,
        curves: Mapping[int, Curve] | None = None,
    ) -> CurveFit:
        """The run's full fit; ``runs`` are the experiment's runs when the caller has them (else they are read), and
        ``curves`` their points by id where the caller has loaded them (a miss fits them; else they are read)."""
        runs = experiment_runs(session, spec.experiment) if runs is None else runs
        if grid_fitted(spec, len(runs)) and any(r.id == run.id for r in runs):
            return self.grid(session, spec, runs, curves)[run.id]
        key = fit_key(run, spec)
        with self._lock:
            hit = self._fits.get(run.id)
            if hit is not None and hit[0] == key:
                self._fits.move_to_end(run.id)
                return hit[1]
        curve = curves[run.id] if curves is not None and run.id in curves else load_curve(session, run.id)
        fit = self._pool.full_fit(curve, spec.fit)
        self._remember(self._fits, run.id, (key, fit), self._size)
        return fit

    def peek(
        self, session: Session, run: Run, spec: ExperimentSpec, runs: Sequence[Run] | None = None
    ) -> CurveFit | None:
        """The run's full fit when this cache holds it for the run's current points and options; None otherwise.
        Never fits (reads answer from it; a miss is queued to the background, :mod:`server.assess.fullfit`)."""
        runs = experiment_runs(session, spec.experiment) if runs is None else runs
        if grid_fitted(spec, len(runs)) and any(r.id == run.id for r in runs):
            key = tuple((r.id, *fit_key(r, spec)) for r in runs)
            with self._lock:
                grid = self._grids.get(spec.id)
            return grid[1].get(run.id) if grid is not None and grid[0] == key else None
        with self._lock:
            hit = self._fits.get(run.id)
        return hit[1] if hit is not None and hit[0] == fit_key(run, spec) else None

    def grid(
        self, session: Session, spec: ExperimentSpec, runs: Sequence[Run], curves: Mapping[int, Curve] | None = None
    ) -> dict[int, CurveFit]:
        """The joint fit of ``runs`` (the experiment's runs), by run id (``curves``: their points where loaded)."""
        key = tuple((r.id, *fit_key(r, spec)) for r in runs)
        with self._lock:
            hit = self._grids.get(spec.id)
            if hit is not None and hit[0] == key:
                self._grids.move_to_end(spec.id)
                return hit[1]
        have = curves or {}
        points = [have[r.id] if r.id in have else load_curve(session, r.id) for r in runs]
        fits = dict(zip((r.id for r in runs), self._pool.grid_fit(points, spec.fit), strict=True))
        self._remember(self._grids, spec.id, (key, fits), max(1, self._size // GRID_MAX_RUNS))
        return fits

    def prefix_fits(self, curves: Sequence[Curve], spec: FitSpec, grid: bool) -> list[CurveFit]:
        """Full fits of arbitrary points (the decision's hold rule refits every run without its newest point), as
        one grid or run by run, memoised on the points and the spec."""
        key = (
            grid,
            *spec.cache_key(),
            *(c.compute.tobytes() + c.pass_rate.tobytes() for c in curves),
        )
        with self._lock:
            hit = self._prefix.get(key)
            if hit is not None:
                self._prefix.move_to_end(key)
                return hit
        fits = self._pool.grid_fit(list(curves), spec) if grid else [self._pool.full_fit(c, spec) for c in curves]
        self._remember(self._prefix, key, fits, max(1, self._size // GRID_MAX_RUNS))
        return fits
