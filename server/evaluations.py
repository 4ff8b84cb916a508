"""Will a run's budget buy enough evaluations to fit? An estimate for the new-experiment preview.

How many pass-rate evaluations a unit of compute buys depends on the engine settings of the workers (how often they
evaluate) and their speed, which the service does not know in advance; it does know what earlier runs of the same
task and model on this server did. The estimate is their median rate (evaluations with compute > 0 per unit of
compute used); a budget whose expected evaluations after the burn-in fall below the fit's minimum gets a warning.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling.data import DEFAULT_BURN_IN_FRACTION, MIN_POINTS
from server.grid import GridDocument
from server.models import Experiment, Run, StoredPoint

#: Earlier runs read for the rate (the newest ones).
MAX_RUNS = 50


@dataclass(frozen=True)
class EvaluationEstimate:
    per_unit: float
    """Median evaluations per unit of compute of the earlier runs."""
    from_runs: int
    per_run: float
    """Expected evaluations (compute > 0) of one run of the smallest budget in the document."""
    after_burn_in: float
    needed: int
    budget_needed: float
    """The smallest budget expected to give ``needed`` evaluations after the burn-in."""

    @property
    def enough(self) -> bool:
        return self.after_burn_in >= self.needed


def evaluation_rate(session: Session, task: str, model: str, compute_unit: str) -> tuple[float, int] | None:
    """Median evaluations (compute > 0) per unit of compute of earlier runs with this task, model and unit."""
    rows = session.execute(
        select(Run.id, Run.compute_used, Experiment.document)
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(Run.task == task, Run.model == model, Run.compute_used > 0, Run.curve_points >= 2)
        .order_by(Run.id.desc())
        .limit(MAX_RUNS)
    ).all()
    used = {int(r.id): float(r.compute_used) for r in rows if (r.document or {}).get("compute_unit") == compute_unit}
    if not used:
        return None
    counts = dict(
        session.execute(
            select(StoredPoint.run_id, func.count())
            .where(StoredPoint.run_id.in_(list(used)), StoredPoint.pass_rate.is_not(None), StoredPoint.compute > 0)
            .group_by(StoredPoint.run_id)
        ).all()
    )
    rates = [counts.get(run_id, 0) / compute for run_id, compute in used.items()]
    return statistics.median(rates), len(rates)


def estimate(session: Session, doc: GridDocument) -> EvaluationEstimate | None:
    """The expected evaluations of the document's smallest run budget, or None without earlier runs to go by."""
    if not doc.task or not doc.model:
        return None
    found = evaluation_rate(session, doc.task, doc.model, doc.compute_unit)
    if found is None:
        return None
    rate, n = found
    budget = float(doc.budget)
    burn = doc.fit.burn_in
    if burn is None:  # the fit leaves out the first DEFAULT_BURN_IN_FRACTION of each run's compute
        kept = 1.0 - DEFAULT_BURN_IN_FRACTION
        budget_needed = MIN_POINTS / kept / rate if rate > 0 else math.inf
    else:  # an absolute burn-in
        kept = max(0.0, (budget - burn) / budget)
        budget_needed = burn + MIN_POINTS / rate if rate > 0 else math.inf
    per_run = rate * budget
    return EvaluationEstimate(rate, n, per_run, per_run * kept, MIN_POINTS, budget_needed)


def warning(est: EvaluationEstimate, unit: str) -> str:
    return (
        f"budget: a run is expected to make about {est.per_run:.1f} evaluations ({est.after_burn_in:.1f} after the "
        f"burn-in), from {est.from_runs} earlier run(s) of this task and model here ({est.per_unit:.3g} evaluations "
        f"per {unit}); a fit needs at least {est.needed} after the burn-in: raise the budget to about "
        f"{est.budget_needed:.3g} {unit} or more, or evaluate more often (the workers' eval.every)"
    )
