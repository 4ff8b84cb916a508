"""The assessment's first step: every database read it needs, once (:class:`Gathered`).

The later steps (:func:`server.assess.deciding.decide`, :func:`server.assess.present.present`) are pure: they read
only what this gathered. Fits come from the fit cache (which may fit, outside any transaction) with the curves read
here; the hold rule's fits of arbitrary points come from :attr:`Gathered.prefix_fits`, the cache's pure fitter.

Invariants: each run's points, guard metrics, ``auto_stop`` rule, recipe and resume count are read once; a run
registered after :func:`gather` read the runs is assessed next time, never half here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit
from rl_core.scaling.decide.work_spread import MIN_POINTS, point_work, work_rates
from rl_core.scaling.fit.model import FloatArray
from server.assess.adaptive import ExperimentBand, experiment_band
from server.assess.fitcache import FitCache, decision_key, grid_fitted
from server.assess.forecasting import Curve, load_curve
from server.assess.runread import auto_resumes, auto_stop_rule, experiment_runs, load_metric, recipe_key
from server.assess.verdict_schemas import WorkKind
from server.lifecycle.experiments import compute_unit_of
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Run, StoredPoint, utcnow

PrefixFits = Callable[[Sequence[Curve]], list[CurveFit]]
"""Full fits of arbitrary points (as one grid or run by run, as the experiment's runs are fitted); no database."""


@dataclass(frozen=True)
class Gathered:
    """Everything one assessment reads of the database (by run id where per run)."""

    spec: ExperimentSpec
    runs: Sequence[Run]
    state: str
    """:func:`current_state` of these runs."""
    data_as_of: datetime
    fits: Mapping[int, CurveFit]
    """Each run's current full fit, as fitted (no adaptive band multiplier)."""
    curves: Mapping[int, Curve]
    metrics: Mapping[int, Mapping[str, FloatArray]]
    """Each run's logged metrics the policy's guard rules read."""
    recipes: Mapping[int, str | None]
    """Each run's recipe key (:func:`server.assess.runread.recipe_key`)."""
    stop_rules: Mapping[int, str | None]
    """The resumable rule ``auto_stop`` stopped each run for (:func:`server.assess.runread.auto_stop_rule`)."""
    resumes: Mapping[int, int]
    starts: Mapping[int, float]
    """Each run's smallest positive compute with a pass rate (where its drawn curve starts)."""
    rates: Mapping[int, float]
    work: WorkKind
    units: Mapping[int, str]
    band: ExperimentBand | None
    """The adaptive band's multiplier as scored from the stored forecasts (``None``: the option is off)."""
    prefix_fits: PrefixFits


def current_state(spec: ExperimentSpec, runs: Sequence[Run]) -> str:
    """Digest of what an assessment of the experiment reads now (cheap: no points are read, nothing is parsed)."""
    parts = [
        spec.policy_key,
        repr(spec.fit.cache_key()),
        *(repr((r.id, decision_key(r, spec), r.status, r.budget, sorted((r.config or {}).items()))) for r in runs),
        *(["adaptive_band"] if spec.fit.adaptive_band else []),  # off: the digest as before the option existed
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def gather(session: Session, spec: ExperimentSpec, cache: FitCache) -> Gathered:
    """Read what the experiment's assessment needs (call it outside write transactions: the cache may fit)."""
    data_as_of = utcnow()
    experiment = spec.experiment
    runs = experiment_runs(session, experiment)
    curves = {r.id: load_curve(session, r.id) for r in runs}
    fits = {r.id: cache.get(session, r, spec, runs, curves) for r in runs}
    band = experiment_band(session, curves, spec.fit.level) if spec.fit.adaptive_band else None
    guard = spec.policy.guard_metrics()
    # The default experiment collects runs of unrelated trainers: their work is not one grid's to compare.
    rates, work = ({}, "steps") if spec.is_default else _work_rates(session, runs)
    unit = compute_unit_of(experiment)
    fit_spec, as_grid = spec.fit, grid_fitted(spec, len(runs))

    def prefix_fits(points: Sequence[Curve]) -> list[CurveFit]:
        return cache.prefix_fits(points, fit_spec, as_grid)

    return Gathered(
        spec=spec,
        runs=runs,
        state=current_state(spec, runs),
        data_as_of=data_as_of,
        fits=fits,
        curves=curves,
        metrics={r.id: {m: load_metric(session, r.id, m) for m in guard} for r in runs},
        recipes={r.id: recipe_key(r) for r in runs},
        stop_rules={r.id: auto_stop_rule(session, r) for r in runs},
        resumes=auto_resumes(session, spec.id),
        starts=_compute_min(curves),
        rates=rates,
        work=work,
        units={r.id: r.compute_unit or unit for r in runs},
        band=band,
        prefix_fits=prefix_fits,
    )


def _compute_min(curves: Mapping[int, Curve]) -> dict[int, float]:
    """Each run's smallest positive compute with a pass rate (where its drawn curve starts), from its curve."""
    positive = {rid: c.compute[c.compute > 0] for rid, c in curves.items()}
    return {rid: float(x.min()) for rid, x in positive.items() if x.size}


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
