"""Which stored advice still applies: a run that has finished (succeeded, failed, stopped) gets no stop/continue/scale
advice, whatever the decision said while it was still running. The advice a finished run does get is ``resume`` (a
run ``auto_stop`` stopped whose stop the grid no longer supports) and ``resume_limit`` (the same, for a run the
policy has already resumed ``resume.max_resumes`` times). The REST recommendations and the event stream's
``recommendations`` events both filter through here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from server.lifecycle.status import FINISHED
from server.store.models import Run


def finished_runs(db: Session | Connection, experiment_id: int) -> set[int]:
    """Ids of the experiment's runs that have finished."""
    stmt = select(Run.id).where(Run.experiment_id == experiment_id, Run.status.in_(sorted(FINISHED)))
    return set(db.scalars(stmt))


#: The advice a finished run still gets: ``resume``, and ``resume_limit`` (the policy would resume it but has used
#: its ``resume.max_resumes``: only a person brings it back).
FINISHED_RUN_RULES = frozenset({"resume", "resume_limit"})


def for_unfinished(body: Iterable[dict[str, Any]], finished: set[int]) -> list[dict[str, Any]]:
    """The recommendations of ``body`` (stored snapshot rows) for runs not in ``finished``, and the advice of
    :data:`FINISHED_RUN_RULES` for any run."""
    return [r for r in body if int(r["run_id"]) not in finished or r.get("rule") in FINISHED_RUN_RULES]


#: The action a finished run shows where its advice does not apply (REST ``action`` fields of the assessment and the
#: verdict's ranking).
NO_ADVICE = "none"


def shown_advice(status: str, action: str, rule: str, reason: str) -> tuple[str, str]:
    """The action and reason a surface shows for a run in ``status``: the decision's own, except that a finished run
    gets :data:`NO_ADVICE` (its rule, e.g. ``leader``, stays), unless the advice is one of
    :data:`FINISHED_RUN_RULES`."""
    if status in FINISHED and rule not in FINISHED_RUN_RULES:
        return NO_ADVICE, f"finished ({status}): no advice"
    return action, reason
