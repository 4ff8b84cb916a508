"""The assessment's third step, pure: the runs' entries (estimates, value at the budget, curves and bands, ETAs),
both rankings, the verdict, the ceiling-or-efficiency card and the adaptive band's account, from what
:func:`server.assess.gather.gather` read and :func:`server.assess.deciding.decide` decided.

Invariants: every estimate lies inside its own interval (one posterior summary, :mod:`rl_core.scaling.fit.summary`);
the value at the budget is the decision's own (median of its value draws), and the curve's band ends at its
interval; no finished run is given advice (:func:`server.assess.advice.shown_advice`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from rl_core.scaling import CurveFit, Recommendation
from rl_core.scaling.fit.calibration import RAW, ForecastCalibration, curve_summary, describe, display_calibration
from rl_core.scaling.fit.summary import summarize
from server.assess.adaptive import ExperimentBand
from server.assess.advice import shown_advice
from server.assess.ceiling_card import build_comparison
from server.assess.deciding import Decision
from server.assess.eta import compute_per_second
from server.assess.fitcache import grid_fitted
from server.assess.gather import Gathered
from server.assess.schemas import AdaptiveBandOut, AssessmentOut, Band, FitEstimates, RunAssessment, Series
from server.assess.verdict import verdict
from server.base.jsonsafe import json_safe
from server.lifecycle.spec import ExperimentSpec
from server.lifecycle.status import ACTIVE, FINISHED
from server.store.models import Run

#: What a run's value at the budget is once it reached its budget or finished (``rl_core.scaling.decide.grid_verdict``).
OBSERVED_VALUE = "observed: the mean of its last evaluations, with the evaluation noise as its interval"
#: Points along each drawn curve (log-spaced) and along the band.
CURVE_POINTS = 48
BAND_POINTS = 24


def run_columns(run: Run) -> dict[str, Any]:
    """The run's own columns that every assessment entry of it repeats (before and after the first assessment)."""
    return {
        "id": run.id,
        "name": run.name,
        "status": run.status,
        "budget": run.budget,
        "compute_used": run.compute_used,
        "n_points": run.n_points,
    }


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
        **run_columns(run),
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
        eta_budget_seconds=eta,
        fitted=fitted,
        extrapolation=extra,
        band=band,
        burn_in=float(fit.burn_in) if fit.burn_in and fit.burn_in > 0 else None,
    )


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


def present(g: Gathered, decision: Decision) -> AssessmentOut:
    """The assessment as every surface reads it (unstamped: ``version`` 0 until stored). Pure."""
    spec, policy, runs = g.spec, g.spec.policy, g.runs
    fits, decided = decision.fits, decision.runs
    calibration = display_calibration(policy.forecast_comparison)  # what the decisions' V_budget numbers show
    width = policy.max_ceiling_width
    entries = {
        run.id: _run_entry(run, fits[run.id], rec, g.starts.get(run.id, 0.0), calibration, width)
        for run, rec in decided
    }
    rank_a = _ranks({k: e.A if e.ceiling_identified and e.fit_status == "ok" else None for k, e in entries.items()})
    rank_v = _ranks({k: e.V_budget for k, e in entries.items()})
    for k, e in entries.items():
        e.rank_ceiling, e.rank_at_budget = rank_a.get(k), rank_v.get(k)
    # A stopped run auto_stop may bring back is waited for while the grid is live (the other runs' points can still
    # move its forecast). Once no run is live nothing it is compared with can change, so the policy will never
    # resume it: waiting then left a finished auto_stop grid undecided for ever.
    live = any(r.status in ACTIVE or r.status == "stopping" for r in runs)
    auto_stop = policy.mode == "auto_stop"
    resumable = frozenset(
        r.id for r in runs if live and auto_stop and r.status == "stopped" and g.stop_rules[r.id] is not None
    )
    label = fit_label(spec, len(runs))
    v = verdict(
        spec.experiment,
        decided,
        decision.verdict,
        fits,
        resumable,
        g.units,
        rates=g.rates,
        work=g.work,
        policy=policy,
        recipes=g.recipes,
    )
    card = build_comparison(spec.experiment.id, runs, fits, entries, policy.ceiling_margin, label)
    counts = Counter(e.action for e in entries.values() if e.status not in FINISHED)
    return AssessmentOut(
        experiment_id=spec.experiment.id,
        version=0,
        computed_at=None,
        data_as_of=g.data_as_of,
        state=g.state,
        compute_unit=spec.compute_unit,
        fit=label,
        policy=policy.mode,
        runs=list(entries.values()),
        verdict=v,
        comparison=card,
        counts=dict(counts),
        adaptive_band=None if g.band is None else adaptive_band_out(spec, g.band),
    )
