"""Experiment-level recommendations: full fits of every run, ``rl_core.scaling.recommend_set``, and the policy.

Invariants: recommendations are stored as append-only snapshots; under ``auto_stop`` only ``running`` runs told to
``stop`` are moved to ``stopping`` (the trainer learns it from its next metrics response or heartbeat).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit, RunState, recommend_set
from server.events import emit
from server.fitpool import FitPool
from server.forecasting import fit_spec_of, load_curve
from server.grid import PolicySpec
from server.jsonsafe import json_safe
from server.models import Experiment, RecommendationSnapshot, Run
from server.runs import transition

AUTO_STOP = "auto_stop"


def state_key(run: Run, experiment: Experiment) -> tuple[object, ...]:
    """Identifies the data and options a run's fit depends on (points are append-only, never changed)."""
    spec = fit_spec_of(experiment)
    return (run.n_points, run.compute_used, run.last_step, spec.burn_in, spec.level)


class FitCache:
    """Full fits (with intervals) keyed by run and the state of its points; bounded, thread-safe."""

    def __init__(self, pool: FitPool | None = None, size: int = 4096) -> None:
        self._pool = pool or FitPool(0)
        self._size = size
        self._lock = threading.Lock()
        self._fits: OrderedDict[int, tuple[tuple[Any, ...], CurveFit]] = OrderedDict()

    def get(self, session: Session, run: Run, experiment: Experiment) -> CurveFit:
        key = state_key(run, experiment)
        spec = fit_spec_of(experiment)
        with self._lock:
            hit = self._fits.get(run.id)
            if hit is not None and hit[0] == key:
                self._fits.move_to_end(run.id)
                return hit[1]
        fit = self._pool.full_fit(load_curve(session, run.id), spec)
        with self._lock:
            self._fits[run.id] = (key, fit)
            self._fits.move_to_end(run.id)
            while len(self._fits) > self._size:
                self._fits.popitem(last=False)
        return fit


@dataclass(frozen=True)
class RunFit:
    run: Run
    fit: CurveFit


def experiment_fits(
    session: Session, experiment: Experiment, cache: FitCache, known: Mapping[int, CurveFit] | None = None
) -> list[RunFit]:
    """Every run of the experiment with its full fit (``known`` fits first, then the cache, which may fit)."""
    runs = session.scalars(select(Run).where(Run.experiment_id == experiment.id).order_by(Run.id)).all()
    have = known or {}
    return [RunFit(r, have[r.id] if r.id in have else cache.get(session, r, experiment)) for r in runs]


def policy_of(experiment: Experiment) -> PolicySpec:
    return PolicySpec.model_validate(experiment.document.get("policy", {}))


def recommend(
    session: Session, experiment: Experiment, cache: FitCache, known: Mapping[int, CurveFit] | None = None
) -> RecommendationSnapshot:
    """Compute, store and publish the experiment's recommendations; apply ``auto_stop``. Pass the fits already
    made as ``known`` to keep fitting out of the caller's transaction."""
    spec = policy_of(experiment)
    fits = experiment_fits(session, experiment, cache, known)
    states = [RunState(str(rf.run.id), rf.fit, rf.run.compute_used, rf.run.budget) for rf in fits]
    recs = recommend_set(states, spec.to_policy())
    by_id = {str(rf.run.id): rf.run for rf in fits}
    body = [
        json_safe(
            {
                "run_id": int(r.run_id),
                "run_name": by_id[r.run_id].name,
                "action": r.action,
                "reason": r.reason,
                "numbers": dict(r.numbers),
            }
        )
        for r in recs
    ]
    snap = RecommendationSnapshot(experiment_id=experiment.id, body=body)
    session.add(snap)
    session.flush()
    emit(session, experiment.id, "recommendations", {"snapshot_id": snap.id, "recommendations": body})
    if spec.mode == AUTO_STOP:
        for r in recs:
            run = by_id[r.run_id]
            if r.action == "stop" and run.status == "running":
                transition(session, run, "stopping", f"auto_stop: {r.reason}", AUTO_STOP)
    return snap
