"""The experiment's recommendations, stored: append-only snapshots of every run's advice, and ``auto_stop``'s moves.

Invariants: recommendations are stored as append-only snapshots; under ``auto_stop`` only ``running`` runs told to
``stop`` are moved to ``stopping`` (the trainer learns it from its next metrics response or heartbeat), and only
``stopped`` runs that ``auto_stop`` itself stopped by a grid comparison and are told to ``resume`` are moved back to
``queued`` (the worker resumes them from their checkpoint). Deciding (:mod:`server.assess.assessing`) and storing are
separate steps, so that fitting never runs inside a write transaction. The fit cache is
:mod:`server.assess.fitcache`, the run readers :mod:`server.assess.runread` (re-exported here for callers outside
``server.assess``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from rl_core.scaling import Recommendation
from server.assess.fitcache import FitCache
from server.assess.runread import (
    AUTO_RESUME_PREFIX,
    AUTO_STOP,
    AUTO_STOP_PREFIX,
    auto_resumes,
    auto_stop_rule,
    experiment_runs,
)
from server.base.jsonsafe import json_safe
from server.lifecycle.runs import transition
from server.lifecycle.spec import ExperimentSpec
from server.store.events import emit
from server.store.models import RecommendationSnapshot, Run

__all__ = [
    "AUTO_RESUME_PREFIX",
    "AUTO_STOP",
    "AUTO_STOP_PREFIX",
    "FitCache",
    "advise",
    "auto_resumes",
    "auto_stop_rule",
    "enact",
    "experiment_runs",
    "latest_recommendations",
    "recommendation_body",
]


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


def advise(
    session: Session, spec: ExperimentSpec, decided: Sequence[tuple[Run, Recommendation]], enact_same: bool = False
) -> RecommendationSnapshot:
    """The snapshot holding ``decided``: the latest one when it holds the same advice (stored once), else a new one,
    stored and published. A new snapshot (or, with ``enact_same``, the same one again) is enacted under ``spec``'s
    policy as it is now (:func:`enact`)."""
    body = recommendation_body(decided)
    last = latest_recommendations(session, spec.id)
    if last is not None and last.body == body:
        if enact_same:
            enact(session, spec, decided)
        return last
    snap = RecommendationSnapshot(experiment_id=spec.id, body=body)
    session.add(snap)
    session.flush()
    emit(session, spec.id, "recommendations", {"snapshot_id": snap.id, "recommendations": body})
    enact(session, spec, decided)
    return snap


def enact(session: Session, spec: ExperimentSpec, decided: Sequence[tuple[Run, Recommendation]]) -> None:
    """Under ``auto_stop``, move running runs told to stop to ``stopping`` and runs the policy itself stopped and now
    told to resume to ``queued``, each with the recommendation's reason (runs are looked up again in ``session``)."""
    if spec.policy.mode != AUTO_STOP:
        return
    for old, r in decided:
        run = session.get(Run, old.id)
        if run is not None and r.action == "stop" and run.status == "running":
            transition(session, run, "stopping", f"{AUTO_STOP_PREFIX}{r.reason}", AUTO_STOP)
        elif run is not None and r.action == "resume" and auto_stop_rule(session, run) is not None:
            transition(session, run, "queued", f"{AUTO_RESUME_PREFIX}{r.reason}", AUTO_STOP)
