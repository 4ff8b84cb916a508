"""When a run gets where the user wants: compute to reach a target pass rate, and wall-clock ETAs at the run's
observed pace. Invariant: every number comes from the same full fit the decisions use (the FitCache), never one
computed on the request (:mod:`server.assess.fullfit` computes a missing one)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from rl_core.scaling import compute_to_reach
from server.assess.fit_schemas import ReachOut
from server.assess.fitcache import FitCache
from server.lifecycle.runs import as_utc
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Run


def compute_per_second(run: Run) -> float | None:
    """The run's pace: compute used over the wall-clock time since it started (``None`` before any progress)."""
    if run.started_at is None or run.compute_used <= 0:
        return None
    elapsed = (as_utc(run.updated_at) - as_utc(run.started_at)).total_seconds()
    return run.compute_used / elapsed if elapsed > 0 else None


def _eta(target_compute: float | None, run: Run, pace: float | None) -> float | None:
    if target_compute is None or pace is None or target_compute == float("inf"):
        return None
    return max(0.0, (target_compute - run.compute_used) / pace)


#: A compute-to-reach answer past this many times the run's budget is an extrapolation, and says so.
FAR_BEYOND_BUDGET = 10.0


def beyond_budget(compute: float | None, budget: float | None, unit: str) -> str | None:
    """The warning a compute-to-reach answer carries when it lies more than :data:`FAR_BEYOND_BUDGET` times past the
    run's budget (``None`` otherwise): the curve was fitted on at most the budget's compute, so such a number is the
    fitted sigmoid carried far outside its data, not a measurement."""
    if compute is None or budget is None or budget <= 0 or compute == float("inf"):
        return None
    if compute <= FAR_BEYOND_BUDGET * budget:
        return None
    return (
        f"far beyond this run's budget of {budget:.3g} {unit} ({compute / budget:,.0f}× it): an extrapolation of "
        "the fitted curve, not a forecast the run's data support"
    )


PENDING = "the run's full fit for its current points is being computed off the request path; ask again shortly"


def reach(session: Session, run: Run, spec: ExperimentSpec, cache: FitCache, target: float) -> ReachOut:
    """Compute (and wall-clock time at the current pace) for ``run`` to reach ``target``, and to its budget, from the
    cached full fit of its current points; without one, ``fit_pending`` (the caller queues the fit) and no compute.
    Never fits."""
    fit = cache.peek(session, run, spec)
    r = None if fit is None else compute_to_reach(fit, target)
    pace = compute_per_second(run)
    compute = None if r is None else r.compute
    warning = beyond_budget(compute, run.budget, spec.compute_unit)
    reason = PENDING if r is None else r.reason
    return ReachOut(
        run_id=run.id,
        target=target,
        compute=None if compute is None or compute == float("inf") else compute,
        reachable=None if compute is None else compute != float("inf"),
        lo=None if r is None else r.lo,
        hi=None if r is None or r.hi is None or r.hi == float("inf") else r.hi,
        probability=None if r is None else r.probability,
        reason=reason if warning is None else f"{reason}; {warning}",
        extrapolation=warning,
        compute_used=run.compute_used,
        budget=run.budget,
        compute_per_second=pace,
        eta_seconds=_eta(compute, run, pace),
        eta_budget_seconds=_eta(run.budget, run, pace),
        as_of=as_utc(run.updated_at) if isinstance(run.updated_at, datetime) else None,
        n_points=run.curve_points if fit is None else fit.n_points,
        fit_pending=fit is None,
    )
