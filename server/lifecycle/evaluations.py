"""Will a run's budget buy enough evaluations to fit? An estimate for the new-experiment preview.

How many pass-rate evaluations a unit of compute buys depends on the engine settings of the workers (how often they
evaluate) and their speed, which the service does not know in advance; it does know what earlier runs of the same
task and model on this server did. The estimate is their median rate (evaluations with compute > 0 per unit of
compute used); a budget whose expected evaluations after the burn-in fall below the fit's minimum gets a warning.

Without such runs, a document on the demo's model is estimated from the document itself: the demo model's measured
throughput (docs/engine.md, "the CPU demo": 951 steps in 0.286 device-hours at 16 prompts x 8 generations of at most
32 + 64 tokens, evaluating every 25 steps) scaled by each run's samples x tokens per step. The form's old defaults
(the scalerl preset's sizes: 48 x 16 samples of up to 16k tokens) bought about 2 evaluations a run, and the preview
said nothing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rl_core.scaling.fit.data import DEFAULT_BURN_IN_FRACTION, MIN_POINTS
from server.lifecycle.grid import GridDocument, GridDocumentError, PlannedRun, expand
from server.store.models import Experiment, Run, StoredPoint

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
    basis: str = ""
    """Where ``per_unit`` comes from, in words."""

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


#: The demo model's measured speed (docs/engine.md, "the CPU demo"), what the document-based estimate scales.
REFERENCE_STEPS_PER_DEVICE_HOUR = 951 / 0.286
REFERENCE_TOKENS_PER_STEP = 16 * 8 * (32 + 64)
#: How often the demo's engine settings (configs/demo.yaml ``eval.every``) evaluate.
REFERENCE_EVAL_EVERY = 25
_DEVICE_HOUR_UNITS = ("gpu_hours", "device_hours")
_STEP_UNITS = ("step", "steps")


def _is_demo_model(model: str) -> bool:
    """The model the reference speed was measured on: the demo's ``{preset: tiny}`` (or just ``tiny``)."""
    import yaml

    try:
        value = yaml.safe_load(model)
    except yaml.YAMLError:
        return False
    return value == "tiny" or (isinstance(value, dict) and value.get("preset") == "tiny" and len(value) == 1)


def _tokens_per_step(recipe: dict[str, Any]) -> float | None:
    try:
        batch, length = recipe["batch"], recipe["length"]
        slots = int(batch["prompts"]) * int(batch["generations"])
        tokens = int(length["max_prompt_tokens"]) + int(length["max_response_tokens"])
    except (KeyError, TypeError, ValueError):
        return None
    return float(slots * tokens) if slots > 0 and tokens > 0 else None


def estimate_from_document(doc: GridDocument, planned: list[PlannedRun] | None = None) -> EvaluationEstimate | None:
    """The expected evaluations of the document's costliest run at the smallest budget, from the document alone
    (see the module docstring); None when the reference does not apply (another model, another compute unit)."""
    if not doc.model or not _is_demo_model(doc.model) or doc.compute_unit not in _DEVICE_HOUR_UNITS + _STEP_UNITS:
        return None
    try:
        runs = planned if planned is not None else expand(doc)
    except GridDocumentError:
        return None
    costs = [c for c in (_tokens_per_step(p.recipe) for p in runs) if c is not None]
    if not costs:
        return None
    if doc.compute_unit in _STEP_UNITS:
        steps_per_unit, how = 1.0, "a run's budget in steps"
    else:
        steps_per_unit = REFERENCE_STEPS_PER_DEVICE_HOUR * REFERENCE_TOKENS_PER_STEP / max(costs)
        how = (
            f"the demo model's measured speed ({REFERENCE_STEPS_PER_DEVICE_HOUR:.0f} steps per device-hour at "
            f"{REFERENCE_TOKENS_PER_STEP} sample tokens a step) scaled to this recipe's {max(costs):.0f}"
        )
    rate = steps_per_unit / REFERENCE_EVAL_EVERY
    basis = f"estimated from the document: {how}, evaluating every {REFERENCE_EVAL_EVERY} steps as the demo does"
    return _estimate(doc, rate, 0, basis)


def estimate(session: Session, doc: GridDocument) -> EvaluationEstimate | None:
    """The expected evaluations of the document's smallest run budget: from earlier runs of its task and model,
    else from the document itself (:func:`estimate_from_document`); None when neither can say."""
    if not doc.task or not doc.model:
        return None
    found = evaluation_rate(session, doc.task, doc.model, doc.compute_unit)
    if found is None:
        return estimate_from_document(doc)
    rate, n = found
    return _estimate(doc, rate, n, f"from {n} earlier run(s) of this task and model here")


def _estimate(doc: GridDocument, rate: float, n: int, basis: str) -> EvaluationEstimate:
    budget = float(doc.budget)
    burn = doc.fit.burn_in
    if burn is None:  # the fit leaves out the first DEFAULT_BURN_IN_FRACTION of each run's compute
        kept = 1.0 - DEFAULT_BURN_IN_FRACTION
        budget_needed = MIN_POINTS / kept / rate if rate > 0 else math.inf
    else:  # an absolute burn-in
        kept = max(0.0, (budget - burn) / budget)
        budget_needed = burn + MIN_POINTS / rate if rate > 0 else math.inf
    per_run = rate * budget
    return EvaluationEstimate(rate, n, per_run, per_run * kept, MIN_POINTS, budget_needed, basis)


def warning(est: EvaluationEstimate, unit: str) -> str:
    source = (
        f"from {est.from_runs} earlier run(s) of this task and model here"
        if est.from_runs
        else "estimated from the document (no earlier run of this task and model here)"
    )
    return (
        f"budget: a run is expected to make about {est.per_run:.1f} evaluations ({est.after_burn_in:.1f} after the "
        f"burn-in), {source} ({est.per_unit:.3g} evaluations per {unit}); a fit needs at least {est.needed} after "
        f"the burn-in, so its forecast would stay 'insufficient data': raise the budget to about "
        f"{est.budget_needed:.3g} {unit} or more, use smaller batches or lengths, or evaluate more often (the "
        "workers' eval.every)"
    )
