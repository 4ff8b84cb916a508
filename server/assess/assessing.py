"""One assessment per experiment state: the fits, every run's decision, the verdict, the ceiling-or-efficiency card,
rankings, forecast curves and ETAs, computed once when the experiment's data or runs change, and stored.

Every surface (the runs table, the banner, both rankings, the card, the charts' curves and bands, the run page,
the home page's counts, alerts, the event stream, the REST answers and ``scalerl wait``) reads the stored
assessment (:func:`latest`); none computes a fit or a decision of its own. :func:`build_assessment` is the only
place they are computed, in four steps: :func:`server.assess.gather.gather` (every database read, once; it reads in
autocommit and never runs inside a write transaction), :func:`server.assess.deciding.decide` and
:func:`server.assess.present.present` (pure), then :func:`store` (one transaction).

Invariants:

- ``state`` digests everything the assessment reads (each run's fit and decision inputs, status and budget, the
  fit options and the policy); a stored assessment whose state differs from :func:`current_state` is *pending*.
- ``version`` grows by one with each stored assessment of an experiment.
- every estimate lies inside its own interval (one posterior summary, :mod:`rl_core.scaling.fit.summary`); the value at
  the budget is the decision's own (median of its value draws), and the curve's band ends at its interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit, Recommendation
from server.assess.deciding import decide
from server.assess.fit_schemas import ValueAtBudget
from server.assess.fitcache import FitCache
from server.assess.forecasting import emit_fit, store_fit
from server.assess.gather import current_state, gather
from server.assess.moments import record_moments
from server.assess.present import fit_label, present, run_columns
from server.assess.recommending import advise
from server.assess.runread import experiment_runs
from server.assess.schemas import AssessmentOut, ComparisonOut, RunAssessment
from server.assess.verdict import DEFAULT_CONFIDENCE, at_confidence, could_still_win, undecided
from server.base.jsonsafe import json_safe
from server.base.lru import Bounded
from server.lifecycle.runs import as_utc
from server.lifecycle.spec import ExperimentSpec
from server.lifecycle.status import ACTIVE
from server.store.events import emit
from server.store.models import RecommendationSnapshot, Run, StoredAssessment, utcnow

__all__ = ["build_assessment", "current_state", "latest", "store", "store_assessment"]


def build_assessment(
    session: Session, spec: ExperimentSpec, cache: FitCache
) -> tuple[AssessmentOut, list[tuple[Run, Recommendation]], dict[int, CurveFit]]:
    """The experiment's assessment (call it outside write transactions), with the decisions and the fits it used,
    for the recommendation and fit snapshots :func:`store` keeps with it (the fits as fitted: an adaptive band
    multiplier is set on this assessment's copies only)."""
    gathered = gather(session, spec, cache)
    decision = decide(gathered)
    return present(gathered, decision), decision.runs, dict(gathered.fits)


@dataclass(frozen=True)
class Stored:
    """What :func:`store` kept: the stored assessment, whether it replaced the one before (False: one that read newer
    data was stored meanwhile, and stays), and the recommendation snapshot it added (``None``: none)."""

    assessment: AssessmentOut
    replaced: bool
    recommendations: RecommendationSnapshot | None


def store(
    session: Session,
    spec: ExperimentSpec,
    assessment: AssessmentOut,
    decided: Sequence[tuple[Run, Recommendation]],
    snapshots: Mapping[int, CurveFit] | None = None,
    factors: Sequence[float] = (),
    requested: bool = False,
) -> Stored:
    """The assessment's fourth step, in the caller's one transaction: the assessment (:func:`store_assessment`),
    the full-fit snapshots of ``snapshots`` (runs whose fit changed) and the recommendations, then the
    ``assessment`` event. Snapshots and the event only when the assessment was stored. The recommendations are
    stored once per distinct advice (:func:`~server.assess.recommending.advise`); a ``requested`` assessment (an
    explicit POST) also applies them under the policy as it is now when the advice is the same, and answers with
    the snapshot that holds it."""
    stamped, replaced = store_assessment(session, assessment)
    if replaced:
        current = {r.id: r for r in session.scalars(select(Run).where(Run.experiment_id == spec.id))}
        for run_id, fit in (snapshots or {}).items():
            run = current.get(run_id)
            if run is not None and fit.status != "insufficient_data":
                stored = store_fit(session, run, fit, "full", factors, make_latest=False, band=spec.fit.adaptive_band)
                emit_fit(session, run, stored)
    snap = advise(session, spec, decided, enact_same=requested) if replaced or requested else None
    if replaced:
        emit(session, spec.id, "assessment", {"version": stamped.version, "state": stamped.state})
    return Stored(stamped, replaced, snap)


def store_assessment(session: Session, assessment: AssessmentOut) -> tuple[AssessmentOut, bool]:
    """Replace the experiment's stored assessment with ``assessment`` at the next version; returns it stamped and
    True, or the stored one and False when that one read newer data (it stays: never replaced by older data). A
    stored one's decision moments are appended in the same transaction (:mod:`server.assess.moments`).

    One upsert statement (``INSERT … ON CONFLICT DO UPDATE``, both databases): a request's refresh and the
    background assessment may store at the same moment without a duplicate-key error, and the version still grows
    by one each time."""
    now = utcnow()
    table = cast(Table, StoredAssessment.__table__)
    dialect = session.get_bind().dialect.name
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    previous = session.scalar(
        select(StoredAssessment.version).where(StoredAssessment.experiment_id == assessment.experiment_id)
    )
    version = 1 if previous is None else previous + 1

    def body_at(v: int) -> dict[str, object]:
        verdict_out = assessment.verdict.model_copy(update={"assessment_version": v, "computed_at": now})
        stamped = assessment.model_copy(update={"version": v, "computed_at": now, "verdict": verdict_out})
        return json_safe(stamped.model_dump(mode="json"))  # type: ignore[no-any-return]

    body = body_at(version)
    as_of = assessment.data_as_of or now
    stmt = insert(table).values(
        experiment_id=assessment.experiment_id,
        version=version,
        state=assessment.state,
        body=body,
        computed_at=now,
        data_as_of=as_of,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c.experiment_id],
        set_={
            "version": table.c.version + 1,
            "state": stmt.excluded.state,
            "body": stmt.excluded.body,
            "computed_at": stmt.excluded.computed_at,
            "data_as_of": stmt.excluded.data_as_of,
        },
        where=table.c.data_as_of <= stmt.excluded.data_as_of,  # never replaced by one that read older data
    )
    session.execute(stmt)
    row = session.execute(
        select(StoredAssessment.version, StoredAssessment.data_as_of).where(
            StoredAssessment.experiment_id == assessment.experiment_id
        )
    ).one()
    if as_utc(row.data_as_of) != as_utc(as_of):  # a newer assessment was stored first: it stays
        kept = session.get(StoredAssessment, assessment.experiment_id)
        assert kept is not None
        return AssessmentOut.model_validate(kept.body), False
    if row.version != version:  # another writer stored in between: stamp the body with the version it got
        version = row.version
        session.execute(
            table.update().where(table.c.experiment_id == assessment.experiment_id).values(body=body_at(version))
        )
    stamped = AssessmentOut.model_validate(body_at(version))
    record_moments(session, stamped)  # the moments it replaces for good, in the same transaction
    return stamped, True


def empty_assessment(spec: ExperimentSpec, runs: Sequence[Run]) -> AssessmentOut:
    """What reads answer before the first assessment: every run listed, nothing decided, nothing computed."""
    entries = [
        RunAssessment(
            **run_columns(r),
            fit_status="insufficient_data",
            fit_message="not assessed yet",
            level=0.8,
            action="insufficient_data",
            rule="",
            reason="not assessed yet",
            numbers={},
        )
        for r in runs
    ]
    finished = all(r.status not in ACTIVE | {"stopping"} for r in runs)
    waiting = [r.name for r in runs if r.status in ACTIVE or r.status == "stopping"]
    return AssessmentOut(
        experiment_id=spec.id,
        version=0,
        computed_at=None,
        state="",
        pending=True,
        compute_unit=spec.compute_unit,
        fit=fit_label(spec, len(runs)),
        policy=spec.policy.mode,
        runs=entries,
        verdict=undecided(spec.id, "no run has a usable fit yet (not assessed yet)", finished, waiting),
        comparison=ComparisonOut(
            experiment_id=spec.id,
            reference_id=None,
            reference_name=None,
            reference_kind="none",
            margin=spec.policy.ceiling_margin,
            rows=[],
            skipped=0,
            fit=fit_label(spec, len(runs)),
        ),
        counts={},
    )


class ParsedAssessments:
    """Stored assessments, parsed, by experiment id with their (version, computed_at): a read parses one once."""

    def __init__(self, size: int = 256) -> None:
        self._parsed: Bounded[int, tuple[tuple[int, object], AssessmentOut]] = Bounded(size)

    def read(self, session: Session, experiment_id: int) -> AssessmentOut | None:
        """The experiment's stored assessment, or ``None`` before its first."""
        head = session.execute(
            select(StoredAssessment.version, StoredAssessment.computed_at).where(
                StoredAssessment.experiment_id == experiment_id
            )
        ).one_or_none()
        if head is None:
            return None
        key = (head.version, as_utc(head.computed_at))
        hit = self._parsed.get(experiment_id)
        if hit is not None and hit[0] == key:
            return hit[1]
        body = session.execute(
            select(StoredAssessment.body).where(StoredAssessment.experiment_id == experiment_id)
        ).scalar_one_or_none()
        if body is None:
            return None
        out = AssessmentOut.model_validate(body)
        self._parsed.put(experiment_id, (key, out))
        return out


def value_at_budget(session: Session, run: Run, parsed: ParsedAssessments) -> ValueAtBudget | None:
    """The run's value at its budget in its experiment's stored assessment (``None`` until it is assessed)."""
    out = parsed.read(session, run.experiment_id)
    entry = None if out is None else next((e for e in out.runs if e.id == run.id), None)
    if out is None or entry is None:
        return None
    return ValueAtBudget(
        value=entry.V_budget,
        lo=entry.V_lo,
        hi=entry.V_hi,
        observed=bool(entry.numbers.get("observed")),
        forecast=entry.forecast,
        assessment_version=out.version,
    )


def latest(session: Session, spec: ExperimentSpec, parsed: ParsedAssessments) -> AssessmentOut:
    """The stored assessment (``pending`` when the experiment changed since), or :func:`empty_assessment`. Never
    fits or decides."""
    runs = experiment_runs(session, spec.experiment)
    out = parsed.read(session, spec.id)
    if out is None:
        return empty_assessment(spec, runs)
    pending = out.state != current_state(spec, runs)
    if not pending:
        return out
    # Runs added or brought back since it was computed could still win: the gate waits for them as well.
    valued = {e.id for e in out.runs if e.V_budget is not None}
    late = [r.name for r in runs if r.id not in valued and could_still_win(r, False)]
    waiting = list(dict.fromkeys([*out.verdict.waiting_for, *late]))
    v = at_confidence(out.verdict.model_copy(update={"waiting_for": waiting}), DEFAULT_CONFIDENCE)
    return out.model_copy(update={"pending": True, "verdict": v})
