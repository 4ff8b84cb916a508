"""The "ceiling vs efficiency" read-out: every run against a reference, by the paper's rule.

Reference: the leave-one-out ``base`` run of the same seed when the experiment has one, else the run with the
highest fitted ceiling. Each pair goes through ``rl_core.scaling.compare_ceilings``: ceilings more than the
experiment's margin apart differ in *ceiling*; otherwise both are refitted at their common A and differ in
*efficiency* (B). At most ``MAX_ROWS`` runs are compared per request.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from rl_core.scaling import FitOptions, compare_ceilings
from server.forecasting import fit_spec_of, load_curve
from server.models import Experiment
from server.recommending import FitCache, RunFit, experiment_fits, policy_of
from server.routes.dashboard.schemas import Comparison, ComparisonOut

MAX_ROWS = 60
BASE_PREFIX = "base,"


def _reference(fits: list[RunFit], seed: int | None) -> tuple[RunFit | None, str]:
    bases = [rf for rf in fits if rf.run.name.startswith(BASE_PREFIX)]
    if bases:
        same_seed = [rf for rf in bases if rf.run.seed == seed]
        return (same_seed or bases)[0], "base"
    usable = [rf for rf in fits if rf.fit.params is not None and rf.fit.status == "ok"]
    if not usable:
        return None, "none"
    return max(usable, key=lambda rf: rf.fit.params.A if rf.fit.params is not None else 0.0), "best"


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def recipe_changes(run: dict[str, Any] | None, reference: dict[str, Any] | None) -> dict[str, Any]:
    """Dotted recipe keys where ``run`` differs from ``reference``, with the run's values."""
    mine, theirs = _flat(run or {}), _flat(reference or {})
    return {k: v for k, v in mine.items() if theirs.get(k) != v}


def _row(session: Session, ref: RunFit, rf: RunFit, margin: float, options: FitOptions) -> Comparison:
    def base(**kw: object) -> Comparison:
        values: dict[str, object] = {
            "run_id": rf.run.id,
            "run_name": rf.run.name,
            "changes": recipe_changes(rf.run.recipe, ref.run.recipe),
            "A_diff": None,
            "probability_higher": None,
            "B_ref": None,
            "B_run": None,
            **kw,
        }
        return Comparison.model_validate(values)

    if rf.fit.params is None or ref.fit.params is None or rf.fit.status != "ok" or ref.fit.status != "ok":
        who = rf if rf.fit.status != "ok" else ref
        reason = f"no usable fit for {who.run.name}: {who.fit.message}"
        return base(effect="unknown", direction="unknown", reason=reason)
    cr, cj = load_curve(session, rf.run.id), load_curve(session, ref.run.id)
    cmp = compare_ceilings(cr.compute, cr.pass_rate, cj.compute, cj.pass_rate, margin, options)
    common = {"A_diff": cmp.difference, "probability_higher": cmp.probability_i_higher, "reason": cmp.reason}
    if cmp.verdict in ("i_higher_ceiling", "j_higher_ceiling"):
        better = cmp.verdict == "i_higher_ceiling"
        return base(effect="ceiling", direction="better" if better else "worse", **common)
    if cmp.verdict in ("i_more_efficient", "j_more_efficient"):
        better = cmp.verdict == "i_more_efficient"
        return base(
            effect="efficiency", direction="better" if better else "worse", B_ref=cmp.B_j, B_run=cmp.B_i, **common
        )
    return base(effect="none", direction="same", B_ref=cmp.B_j, B_run=cmp.B_i, **common)


def build_comparison(session: Session, experiment: Experiment, cache: FitCache) -> ComparisonOut:
    fits = experiment_fits(session, experiment, cache)
    margin = policy_of(experiment).ceiling_margin
    spec = fit_spec_of(experiment)
    options = spec.options()
    rows: list[Comparison] = []
    first_ref, kind = _reference(fits, None)
    others = [rf for rf in fits if first_ref is None or rf.run.id != first_ref.run.id]
    for rf in others[:MAX_ROWS]:
        ref, _ = _reference(fits, rf.run.seed)
        if ref is None or ref.run.id == rf.run.id:
            continue
        rows.append(_row(session, ref, rf, margin, options))
    return ComparisonOut(
        experiment_id=experiment.id,
        reference_id=None if first_ref is None else first_ref.run.id,
        reference_name=None if first_ref is None else first_ref.run.name,
        reference_kind=kind,  # type: ignore[arg-type]
        margin=margin,
        rows=rows,
        skipped=max(0, len(others) - MAX_ROWS),
    )
