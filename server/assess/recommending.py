"""Experiment-level recommendations: full fits of every run, ``rl_core.scaling.decide_grid``, and the policy.

Invariants: recommendations are stored as append-only snapshots; under ``auto_stop`` only ``running`` runs told to
``stop`` are moved to ``stopping`` (the trainer learns it from its next metrics response or heartbeat), and only
``stopped`` runs that ``auto_stop`` itself stopped by a grid comparison and are told to ``resume`` are moved back to
``queued`` (the worker resumes them from their checkpoint); deciding
(fits) and storing are separate steps so that fitting never runs inside a write transaction.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit, GridRun, Recommendation
from rl_core.scaling.decide.grid_decisions import RunStatus, assess_grid
from rl_core.scaling.decide.grid_verdict import GridVerdict
from rl_core.scaling.decide.resume import resumable_rule
from server.assess.fitpool import FitPool
from server.assess.forecasting import Curve, load_curve
from server.base.jsonsafe import json_safe
from server.lifecycle.grid import FitSpec
from server.lifecycle.recipes import effective_recipe
from server.lifecycle.runs import transition
from server.lifecycle.spec import ExperimentSpec
from server.store.events import emit
from server.store.models import Experiment, RecommendationSnapshot, Run, RunTransition, StoredPoint

AUTO_STOP = "auto_stop"
#: How the reason of a stop (and a resume) made by ``auto_stop`` starts.
AUTO_STOP_PREFIX = "auto_stop: "
AUTO_RESUME_PREFIX = "auto_resume: "


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

    def get(self, session: Session, run: Run, spec: ExperimentSpec, runs: Sequence[Run] | None = None) -> CurveFit:
        """The run's full fit; ``runs`` are the experiment's runs when the caller has them (else they are read)."""
        runs = experiment_runs(session, spec.experiment) if runs is None else runs
        if grid_fitted(spec, len(runs)) and any(r.id == run.id for r in runs):
            return self.grid(session, spec, runs)[run.id]
        key = fit_key(run, spec)
        with self._lock:
            hit = self._fits.get(run.id)
            if hit is not None and hit[0] == key:
                self._fits.move_to_end(run.id)
                return hit[1]
        fit = self._pool.full_fit(load_curve(session, run.id), spec.fit)
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

    def grid(self, session: Session, spec: ExperimentSpec, runs: Sequence[Run]) -> dict[int, CurveFit]:
        """The joint fit of ``runs`` (the experiment's runs), by run id."""
        key = tuple((r.id, *fit_key(r, spec)) for r in runs)
        with self._lock:
            hit = self._grids.get(spec.id)
            if hit is not None and hit[0] == key:
                self._grids.move_to_end(spec.id)
                return hit[1]
        curves = [load_curve(session, r.id) for r in runs]
        fits = dict(zip((r.id for r in runs), self._pool.grid_fit(curves, spec.fit), strict=True))
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


def experiment_runs(session: Session, experiment: Experiment) -> Sequence[Run]:
    return session.scalars(select(Run).where(Run.experiment_id == experiment.id).order_by(Run.id)).all()


@dataclass(frozen=True)
class RunFit:
    run: Run
    fit: CurveFit


def experiment_fits(
    session: Session,
    spec: ExperimentSpec,
    cache: FitCache,
    known: Mapping[int, CurveFit] | None = None,
    runs: Sequence[Run] | None = None,
) -> list[RunFit]:
    """Every run of the experiment (``runs``: as the caller read them) with its full fit (``known`` fits first, then
    the cache, which may fit)."""
    runs = experiment_runs(session, spec.experiment) if runs is None else runs
    have = known or {}
    return [RunFit(r, have[r.id] if r.id in have else cache.get(session, r, spec, runs)) for r in runs]


def grid_status(run: Run) -> RunStatus:
    """How the decision sees a run: queued and running are live; succeeded completed; anything else stopped."""
    if run.status in ("queued", "running"):
        return "live"
    return "completed" if run.status == "succeeded" else "stopped"


def recipe_key(run: Run) -> str | None:
    """The run's recipe as a canonical string: runs with the same key are seeds of one recipe (replicates), which
    the grid comparison never ranks against each other. ``None`` (a run of its own) unless the run has both a
    recipe and a seed: an external trainer that registers every run with the same preset but varies settings the
    recipe does not hold must not have its runs taken for replicates."""
    recipe = effective_recipe(run)
    if not recipe or run.seed is None:
        return None
    return json.dumps(recipe, sort_keys=True, separators=(",", ":"))


def auto_stop_rule(session: Session, run: Run) -> str | None:
    """The grid rule ``auto_stop`` stopped a ``stopped`` run for (it may be resumed by the same policy), or
    ``None``: the run is not stopped, or its latest move to ``stopping`` was made by a user, a trainer or another
    rule, and only a user brings it back."""
    if run.status != "stopped":
        return None
    last = session.scalars(
        select(RunTransition)
        .where(RunTransition.run_id == run.id, RunTransition.to_status == "stopping")
        .order_by(RunTransition.id.desc())
        .limit(1)
    ).first()
    if last is None or last.actor != AUTO_STOP or not last.reason.startswith(AUTO_STOP_PREFIX):
        return None
    return resumable_rule(last.reason.removeprefix(AUTO_STOP_PREFIX))


def auto_resumes(session: Session, experiment_id: int) -> dict[int, int]:
    """How many times ``auto_stop`` has resumed each run of the experiment (its moves back to ``queued``; a user's
    resume is not counted), for runs it resumed at all: what ``Policy.max_resumes`` bounds."""
    rows = session.execute(
        select(RunTransition.run_id, func.count())
        .where(
            RunTransition.run_id.in_(select(Run.id).where(Run.experiment_id == experiment_id)),
            RunTransition.to_status == "queued",
            RunTransition.actor == AUTO_STOP,
            RunTransition.reason.startswith(AUTO_RESUME_PREFIX),
        )
        .group_by(RunTransition.run_id)
    )
    return {int(run_id): int(n) for run_id, n in rows}


def load_metric(session: Session, run_id: int, name: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    """One logged metric of a run in step order (NaN where a point does not carry it), for guard rules."""
    rows = session.execute(
        select(StoredPoint.metrics).where(StoredPoint.run_id == run_id).order_by(StoredPoint.step)
    ).scalars()
    values = [(m or {}).get(name) for m in rows]
    return np.array([float(v) if isinstance(v, (int, float)) else np.nan for v in values], dtype=np.float64)


@dataclass(frozen=True)
class Decision:
    """The experiment's decision: each run with its recommendation (in run id order) and the grid's verdict, whose
    indices are positions in ``runs``."""

    runs: list[tuple[Run, Recommendation]]
    verdict: GridVerdict


def decide(
    session: Session,
    spec: ExperimentSpec,
    cache: FitCache,
    known: Mapping[int, CurveFit] | None = None,
    band_scale: float = 1.0,
    curves: Mapping[int, Curve] | None = None,
    runs: Sequence[Run] | None = None,
) -> Decision:
    """The experiment's recommendations and verdict from :func:`rl_core.scaling.decide.grid_decisions.assess_grid`,
    the same function the replay benchmark measures. Fits (current and, for the hold rule, without each run's newest
    point) come from ``known``/the cache; call it outside write transactions. ``band_scale`` (an experiment's
    adaptive band) is set on the hold rule's fits as ``known`` carries it on the current ones; ``curves`` are the
    runs' points by id where the caller has loaded them already; ``runs`` the runs as the caller read them (a run
    registered since is decided next time, never half here)."""
    policy = spec.policy
    fits = experiment_fits(session, spec, cache, known, runs)
    loaded = curves or {}
    curve_of = {rf.run.id: loaded[rf.run.id] if rf.run.id in loaded else load_curve(session, rf.run.id) for rf in fits}
    resumed = auto_resumes(session, spec.id)
    grid = [
        GridRun(
            str(rf.run.id),
            curve_of[rf.run.id].compute,
            curve_of[rf.run.id].pass_rate,
            grid_status(rf.run),
            rf.run.budget,
            rf.run.name,
            {m: load_metric(session, rf.run.id, m) for m in policy.guard_metrics()},
            recipe_key(rf.run),
            auto_stop_rule(session, rf.run),
            resumed.get(rf.run.id, 0),
        )
        for rf in fits
    ]
    fit_spec = spec.fit
    as_grid = grid_fitted(spec, len(fits))

    def fitter(points: Sequence[tuple[Any, Any]]) -> list[CurveFit]:
        fitted = cache.prefix_fits([Curve(np.asarray(x), np.asarray(y)) for x, y in points], fit_spec, as_grid)
        return fitted if band_scale == 1.0 else [replace(f, band_scale=band_scale) for f in fitted]

    assessed = assess_grid(grid, policy, fitter, [rf.fit for rf in fits])
    pairs = [(rf.run, rec) for rf, rec in zip(fits, assessed.recommendations, strict=True)]
    return Decision(pairs, assessed.verdict)


def recommendation_body(decided: Sequence[tuple[Run, Recommendation]]) -> list[Any]:
    """The stored form of ``decided`` (one entry per run)."""
    return [
        json_safe(
            {
                "run_id": run.id,
                "run_name": run.name,
                "action": r.action,
                "rule": r.rule,
                "reason": r.reason,
                "numbers": dict(r.numbers),
            }
        )
        for run, r in decided
    ]


def latest_recommendations(session: Session, experiment_id: int) -> RecommendationSnapshot | None:
    return session.scalar(
        select(RecommendationSnapshot)
        .where(RecommendationSnapshot.experiment_id == experiment_id)
        .order_by(RecommendationSnapshot.id.desc())
        .limit(1)
    )


def store_recommendations(
    session: Session, spec: ExperimentSpec, decided: Sequence[tuple[Run, Recommendation]]
) -> RecommendationSnapshot:
    """Store and publish a snapshot of ``decided``; under ``auto_stop`` move running runs told to stop to
    ``stopping`` with the recommendation's reason (runs are looked up again in ``session``)."""
    body = recommendation_body(decided)
    snap = RecommendationSnapshot(experiment_id=spec.id, body=body)
    session.add(snap)
    session.flush()
    emit(session, spec.id, "recommendations", {"snapshot_id": snap.id, "recommendations": body})
    if spec.policy.mode == AUTO_STOP:
        for old, r in decided:
            run = session.get(Run, old.id)
            if run is not None and r.action == "stop" and run.status == "running":
                transition(session, run, "stopping", f"{AUTO_STOP_PREFIX}{r.reason}", AUTO_STOP)
            elif run is not None and r.action == "resume" and auto_stop_rule(session, run) is not None:
                transition(session, run, "queued", f"{AUTO_RESUME_PREFIX}{r.reason}", AUTO_STOP)
    return snap
