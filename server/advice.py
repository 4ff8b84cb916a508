"""Which stored advice still applies: a run that has finished (succeeded, failed, stopped) gets no stop/continue/scale
advice, whatever the decision said while it was still running; the one advice for a finished run is ``resume`` (a run
``auto_stop`` stopped whose stop the grid no longer supports). The REST recommendations and the event stream's
``recommendations`` events both filter through here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from server.models import Run
from server.status import FINISHED


def finished_runs(db: Session | Connection, experiment_id: int) -> set[int]:
    """Ids of the experiment's runs that have finished."""
    stmt = select(Run.id).where(Run.experiment_id == experiment_id, Run.status.in_(sorted(FINISHED)))
    return set(db.scalars(stmt))


def for_unfinished(body: Iterable[dict[str, Any]], finished: set[int]) -> list[dict[str, Any]]:
    """The recommendations of ``body`` (stored snapshot rows) for runs not in ``finished``, and ``resume`` advice."""
    return [r for r in body if int(r["run_id"]) not in finished or r.get("action") == "resume"]
