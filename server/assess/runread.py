"""What an assessment reads of an experiment's runs besides their fits: the runs, how the decision sees each,
their recipes, the rule ``auto_stop`` stopped them for, its resumes, and logged metrics for guard rules.

Invariant: these only read; nothing here fits, decides or writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling.decide.grid_decisions import RunStatus
from rl_core.scaling.decide.resume import resumable_rule
from server.lifecycle.recipes import effective_recipe
from server.store.models import Experiment, Run, RunTransition, StoredPoint

AUTO_STOP = "auto_stop"
#: How the reason of a stop (and a resume) made by ``auto_stop`` starts.
AUTO_STOP_PREFIX = "auto_stop: "
AUTO_RESUME_PREFIX = "auto_resume: "


def experiment_runs(session: Session, experiment: Experiment) -> Sequence[Run]:
    return session.scalars(select(Run).where(Run.experiment_id == experiment.id).order_by(Run.id)).all()


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
    resume is not counted), for runs it resumed at all: what ``Policy.resume.max_resumes`` bounds."""
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
