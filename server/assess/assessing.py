"""One assessment per experiment state: the fits, every run's decision, the verdict, the ceiling-or-efficiency card,
rankings, forecast curves and ETAs, computed once when the experiment's data or runs change, and stored.

Every surface (the runs table, the banner, both rankings, the card, the charts' curves and bands, the run page,
the home page's counts, alerts, the event stream, the REST answers and ``scalerl wait``) reads the stored
assessment (:func:`latest`); none computes a fit or a decision of its own. :func:`build_assessment` is the only
place they are computed; it reads in autocommit and never runs inside a write transaction.

Invariants:

- ``state`` digests everything the assessment reads (each run's fit and decision inputs, status and budget, the
  fit options and the policy); a stored assessment whose state differs from :func:`current_state` is *pending*.
- ``version`` grows by one with each stored assessment of an experiment.
- every estimate lies inside its own interval (one posterior summary, :mod:`rl_core.scaling.fit.summary`); the value at
  the budget is the decision's own (median of its value draws), and the curve's band ends at its interval.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import cast

import numpy as np
from sqlalchemy import Table, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit, Recommendation
from rl_core.scaling.decide.work_spread import MIN_POINTS, point_work, work_rates
from rl_core.scaling.fit.calibration import RAW, ForecastCalibration, curve_summary, describe, display_calibration
from rl_core.scaling.fit.summary import summarize
from server.assess.adaptive import ExperimentBand, experiment_band
from server.assess.advice import shown_advice
from server.assess.ceiling_card import build_comparison
from server.assess.eta import compute_per_second
from server.assess.fit_schemas import ValueAtBudget, WorkKind
from server.assess.forecasting import load_curve
from server.assess.moments import record_moments
from server.assess.recommending import (
    AUTO_STOP,
    FitCache,
    auto_stop_rule,
    decide,
    decision_key,
    experiment_fits,
    experiment_runs,
    grid_fitted,
)
from server.assess.schemas import (
    AdaptiveBandOut,
    AssessmentOut,
    Band,
    ComparisonOut,
    FitEstimates,
    RunAssessment,
    Series,
)
from server.assess.verdict import DEFAULT_CONFIDENCE, at_confidence, could_still_win, undecided, verdict
from server.base.jsonsafe import json_safe
from server.base.lru import Bounded
from server.lifecycle.experiments import compute_unit_of
from server.lifecycle.runs import as_utc
from server.lifecycle.spec import ExperimentSpec
from server.lifecycle.status import ACTIVE, FINISHED
from server.store.models import Experiment, Run, StoredAssessment, StoredPoint, utcnow

#: What a run's value at the budget is once it reached its budget or finished (``rl_core.scaling.decide.grid_verdict``).
OBSERVED_VALUE = "observed: the mean of its last evaluations, with the evaluation noise as its interval"
#: Points along each drawn curve (log-spaced) and along the band.
CURVE_POINTS = 48
BAND_POINTS = 24


def current_state(spec: ExperimentSpec, runs: Sequence[Run]) -> str:
    """Digest of what an assessment of the experiment reads now (cheap: no points are read, nothing is parsed)."""
    parts = [
        spec.policy_key,
        repr(spec.fit.cache_key()),
        *(repr((r.id, decision_key(r, spec), r.status, r.budget, sorted((r.config or {}).items()))) for r in runs),
        *(["adaptive_band"] if spec.fit.adaptive_band else []),  # off: the digest as before the option existed
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def fit_label(spec: ExperimentSpec, n_runs: int) -> str:
    """Which fit every number of the experiment comes from."""
    how = "one grid fit of the experiment's runs" if grid_fitted(spec, n_runs) else "each run fitted on its own"
    return f"{how}; {spec.fit.describe()}"


def _finite(v: object) -> float | None:
    if v is None:
        return None
    f = float(v)  # type: ignore[arg-type]
    return f if np.isfinite(f) else None


def _rounded(v: object) -> float | None:
    f = _finite(v)
    return None if f is None else float(f"{f:.6g}")


def _series(x: np.ndarray, y: np.ndarray) -> Series:
    """A drawn curve (6 significant digits: a chart's precision; the estimates themselves are never rounded)."""
    return Series(x=[float(f"{v:.6g}") for v in x], y=[_rounded(v) for v in y])


def _curves(
    fit: CurveFit,
    compute_min: float,
    budget: float | None,
    value: tuple[float | None, float | None, float | None],
    calibration: ForecastCalibration | None,
) -> tuple[Series | None, Series | None, Band | None]:
    """The fitted R(C) over the data (the sigmoid's posterior median: the curve the data were fitted with), and the
    forecast the value at the budget is (``calibration``'s draws: the blend the pages name) from the last observed
    compute on to the budget, with its band; at the budget both end on the decision's value and interval. A run
    whose value is observed (``budget`` ``None``) gets no forecast past its data."""
    if fit.params is None or fit.compute_max <= 0:
        return None, None, None
    start = compute_min if compute_min > 0 else fit.compute_max / 100.0

    def median_curve(x: np.ndarray, cal: ForecastCalibration | None) -> np.ndarray:
        summary = curve_summary(fit, x, cal)
        return fit.params(x) if summary is None else summary[0]  # type: ignore[misc]

    x_fit = np.geomspace(start, fit.compute_max, CURVE_POINTS) if start < fit.compute_max else np.array([start])
    fitted = _series(x_fit, median_curve(x_fit, RAW))
    if budget is None or budget <= fit.compute_max * 1.001:
        return fitted, None, None
    x_ext = np.geomspace(fit.compute_max, budget, CURVE_POINTS // 2)
    x_band = np.geomspace(fit.compute_max, budget, BAND_POINTS)
    summary = curve_summary(fit, x_band, calibration)
    # The forecast and its band are drawn at the same computes: one summary of the draws for both (computed twice,
    # it was a third of the curves' cost, 0.2 s of a 60-run grid's assessment).
    ext = summary if np.array_equal(x_ext, x_band) else curve_summary(fit, x_ext, calibration)
    y_ext = fit.params(x_ext) if ext is None else ext[0].copy()
    v, v_lo, v_hi = value
    if v is not None:
        y_ext[-1] = v
    extra = _series(x_ext, y_ext)
    if summary is None:
        return fitted, extra, None
    _, lo, hi = summary
    if v_lo is not None and v_hi is not None:
        lo[-1], hi[-1] = v_lo, v_hi
    return (
        fitted,
        extra,
        Band(x=list(_series(x_band, lo).x), lo=[_rounded(v) for v in lo], hi=[_rounded(v) for v in hi]),
    )


def _value_at_budget(
    fit: CurveFit, rec: Recommendation, budget: float | None, calibration: ForecastCalibration | None
) -> tuple[float | None, ...]:
    """The decision's value at the budget; for runs it did not value (stopped ones), the same summary of the fit."""
    n = rec.numbers
    if n.get("V_budget") is not None:
        return _finite(n["V_budget"]), _finite(n.get("V_lo")), _finite(n.get("V_hi"))
    if budget is None or not fit.usable:
        return None, None, None
    summary = curve_summary(fit, np.array([budget]), calibration)
    if summary is None:
        return None, None, None
    return tuple(_finite(float(a[0])) for a in summary)


def _ranks(values: Mapping[int, float | None]) -> dict[int, int]:
    ordered = sorted((v, k) for k, v in values.items() if v is not None)
    return {k: i + 1 for i, (_, k) in enumerate(reversed(ordered))}


def _estimates(fit: CurveFit, max_ceiling_width: float) -> FitEstimates:
    """The fit's one posterior summary as the pages show it (identified by the policy's ``max_ceiling_width``)."""
    summary = summarize(fit, max_ceiling_width)
    values: dict[str, object] = {"ceiling_identified": summary.ceiling_identified}
    for name, est in summary.estimates.items():
        values.update({name: _finite(est.value), f"{name}_lo": _finite(est.lo), f"{name}_hi": _finite(est.hi)})
    return FitEstimates.model_validate({k: v for k, v in values.items() if k in FitEstimates.model_fields})


def _run_entry(
    run: Run,
    fit: CurveFit,
    rec: Recommendation,
    compute_min: float,
    calibration: ForecastCalibration,
    max_ceiling_width: float,
) -> RunAssessment:
    value = _value_at_budget(fit, rec, run.budget, calibration)
    action, reason = shown_advice(run.status, rec.action, rec.rule, rec.reason)
    observed = bool(rec.numbers.get("observed"))
    horizon = None if observed else run.budget
    fitted, extra, band = _curves(fit, compute_min, horizon, value, calibration)  # type: ignore[arg-type]
    pace = compute_per_second(run) if run.status in ACTIVE else None
    eta = None
    if pace and run.budget is not None and run.status == "running":
        eta = max(0.0, (run.budget - run.compute_used) / pace)
    return RunAssessment(
        id=run.id,
        name=run.name,
        status=run.status,
        budget=run.budget,
        compute_used=run.compute_used,
        n_points=run.n_points,
        fit_status=fit.status,
        fit_message=fit.message,
        level=fit.level,
        prior=fit.prior,
        **_estimates(fit, max_ceiling_width).model_dump(),
        V_budget=value[0],
        V_lo=value[1],
        V_hi=value[2],
        forecast=OBSERVED_VALUE if observed else describe(fit, calibration),
        action=action,
        rule=rec.rule,
        reason=reason,
        numbers=json_safe(dict(rec.numbers)),
        rank_ceiling=None,
        rank_at_budget=None,
        eta_budget_seconds=eta,
        fitted=fitted,
        extrapolation=extra,
        band=band,
        burn_in=float(fit.burn_in) if fit.burn_in and fit.burn_in > 0 else None,
    )


def _compute_min(session: Session, run_ids: Sequence[int]) -> dict[int, float]:
    """Each run's smallest positive compute with a pass rate (where its drawn curve starts)."""
    rows = session.execute(
        select(StoredPoint.run_id, func.min(StoredPoint.compute))
        .where(StoredPoint.run_id.in_(run_ids), StoredPoint.pass_rate.is_not(None), StoredPoint.compute > 0)
        .group_by(StoredPoint.run_id)
    ).all()
    return {int(r): float(c) for r, c in rows}


def _work_rates(session: Session, runs: Sequence[Run]) -> tuple[dict[int, float], WorkKind]:
    """Each run's work per compute unit, from its latest stored point with a pass rate: the tokens it processed
    when every such run reports them, else its steps (:mod:`rl_core.scaling.decide.work_spread`), for runs with
    enough points."""
    ids = [r.id for r in runs if r.curve_points >= MIN_POINTS]
    if not ids:
        return {}, "steps"
    last = (
        select(StoredPoint.run_id, func.max(StoredPoint.step).label("step"))
        .where(StoredPoint.run_id.in_(ids), StoredPoint.pass_rate.is_not(None))
        .group_by(StoredPoint.run_id)
        .subquery()
    )
    rows = session.execute(
        select(StoredPoint.run_id, StoredPoint.step, StoredPoint.compute, StoredPoint.metrics).join(
            last, (StoredPoint.run_id == last.c.run_id) & (StoredPoint.step == last.c.step)
        )
    ).all()
    points = {r.id: r.curve_points for r in runs}
    work = {int(rid): point_work(float(step), metrics) for rid, step, _, metrics in rows}
    tokens = {rid: t for rid, (_, t) in work.items() if t is not None}
    by_tokens = len(tokens) == len(work)
    computes = {int(rid): float(compute) for rid, _, compute, _ in rows}
    rates = work_rates(
        {rid: (tokens[rid] if by_tokens else steps, computes[rid], points[rid]) for rid, (steps, _) in work.items()}
    )
    return rates, "tokens" if by_tokens else "steps"


def _units(runs: Sequence[Run], experiment: Experiment) -> dict[int, str]:
    """Each run's compute unit: the one it registered with, else the experiment's."""
    unit = compute_unit_of(experiment)
    return {r.id: r.compute_unit or unit for r in runs}


def adaptive_band_out(spec: ExperimentSpec, band: ExperimentBand) -> AdaptiveBandOut:
    """The assessment's account of the experiment's band multiplier."""
    applied = spec.policy.forecast_comparison == "calibrated"
    if band.residuals == 0:
        note = (
            "no earlier forecast has points far enough past its data yet: the shipped calibrated band (×1)"
            if band.forecasts == 0
            else "earlier forecasts have no points far enough past their data yet: the shipped calibrated band (×1)"
        )
    else:
        how = "wider" if band.scale > 1.0 else "narrower" if band.scale < 1.0 else "unchanged"
        note = (
            f"bands ×{band.scale:.2f} ({how}): the {spec.fit.level:.0%} quantile of {band.residuals} points of "
            f"{band.runs} runs "
            f"against {band.forecasts} earlier forecasts, in units of their calibrated band, shrunk toward 1"
        )
    if not applied:
        note += f"; not applied: policy.forecast_comparison is {spec.policy.forecast_comparison!r}, not 'calibrated'"
    return AdaptiveBandOut(
        scale=band.scale,
        residuals=band.residuals,
        runs=band.runs,
        forecasts=band.forecasts,
        applied=applied,
        note=note,
    )


def build_assessment(
    session: Session, spec: ExperimentSpec, cache: FitCache, known: Mapping[int, CurveFit] | None = None
) -> tuple[AssessmentOut, list[tuple[Run, Recommendation]], dict[int, CurveFit]]:
    """Compute the experiment's assessment (call it outside write transactions); also returns the decisions and
    fits it used, for the recommendation and fit snapshots stored with it (the fits as fitted: an adaptive band
    multiplier is set on this assessment's copies only)."""
    data_as_of = utcnow()
    experiment = spec.experiment
    runs = experiment_runs(session, experiment)
    state = current_state(spec, runs)
    fitted = {rf.run.id: rf.fit for rf in experiment_fits(session, spec, cache, known, runs)}
    band_out, scale, curves = None, 1.0, None
    if spec.fit.adaptive_band:
        curves = {r.id: load_curve(session, r.id) for r in runs}
        band = experiment_band(session, curves, spec.fit.level)
        band_out = adaptive_band_out(spec, band)
        scale = band.scale if band_out.applied else 1.0
    # One path: every forecast drawn from these fits (the band, the interval, the decisions' draws) is scaled.
    fits = fitted if scale == 1.0 else {rid: replace(f, band_scale=scale) for rid, f in fitted.items()}
    decision = decide(session, spec, cache, fits, band_scale=scale, curves=curves, runs=runs)
    decided = decision.runs
    policy = spec.policy
    starts = _compute_min(session, [r.id for r in runs])
    calibration = display_calibration(policy.forecast_comparison)  # what the decisions' V_budget numbers show
    width = policy.max_ceiling_width
    entries = {
        run.id: _run_entry(run, fits[run.id], rec, starts.get(run.id, 0.0), calibration, width) for run, rec in decided
    }
    rank_a = _ranks({k: e.A if e.ceiling_identified and e.fit_status == "ok" else None for k, e in entries.items()})
    rank_v = _ranks({k: e.V_budget for k, e in entries.items()})
    for k, e in entries.items():
        e.rank_ceiling, e.rank_at_budget = rank_a.get(k), rank_v.get(k)
    # A stopped run auto_stop may bring back is waited for while the grid is live (the other runs' points can still
    # move its forecast). Once no run is live nothing it is compared with can change, so the policy will never
    # resume it: waiting then left a finished auto_stop grid undecided for ever.
    live = any(r.status in ACTIVE or r.status == "stopping" for r in runs)
    resumable = frozenset(
        r.id for r in runs if live and policy.mode == AUTO_STOP and r.status == "stopped" and auto_stop_rule(session, r)
    )
    label = fit_label(spec, len(runs))
    units = _units(runs, experiment)
    # The default experiment collects runs of unrelated trainers: their work is not one grid's to compare.
    rates, work = ({}, "steps") if spec.is_default else _work_rates(session, runs)
    v = verdict(
        experiment,
        decided,
        decision.verdict,
        fits,
        resumable,
        units,
        rates=rates,
        work=work,
        policy=policy,
    )
    card = build_comparison(experiment.id, runs, fits, entries, policy.ceiling_margin, label)
    counts = Counter(e.action for e in entries.values() if e.status not in FINISHED)
    out = AssessmentOut(
        experiment_id=experiment.id,
        version=0,
        computed_at=None,
        data_as_of=data_as_of,
        state=state,
        compute_unit=spec.compute_unit,
        fit=label,
        policy=policy.mode,
        runs=list(entries.values()),
        verdict=v,
        comparison=card,
        counts=dict(counts),
        adaptive_band=band_out,
    )
    return out, decided, fitted


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
            id=r.id,
            name=r.name,
            status=r.status,
            budget=r.budget,
            compute_used=r.compute_used,
            n_points=r.n_points,
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
