"""The CI gate: the run the decisions rank first and whether that is decided.

It is computed inside the experiment's assessment (:mod:`server.assess.assessing`) from the verdict of the decision the
dashboard shows and the replay measures (``rl_core.scaling.decide.grid_verdict``, one leader rule): the best run is
the run with the highest value at the budget (its forecast while it runs, what it observed once it reached its
budget or finished; a ceiling on the A = 1 bound does not keep a run from leading); the runner-up is the next one of
another recipe (the best run's own seeds are ranked after it but never its runner-up, unless the policy sets
``rank_replicates``). The ranking is that one order, so the difference is never negative.

Invariants:

- *decided* needs every run that could still win to have been assessed: while a queued, running or resumable run
  has no usable forecast at its budget, the verdict is undecided and ``waiting_for`` names it. A grid whose runs
  have barely started can never pass the gate.
- runs reporting compute in different units are never compared.
- then it is decided when the probability that the best run ends higher at the budget than the runner-up reaches
  ``min_confidence``, or when every other run has been stopped or is dominated. Once both have reached their budget
  that probability is the observation's (their final evaluations against the evaluation noise).
- no finished run is given advice (:func:`server.assess.advice.shown_advice`).
- when the runs' steps per compute unit (each run's latest stored point with a pass rate: step / compute; runs
  with at least 3 of them) differ by more than the policy's ``max_work_spread`` (1.2: max / min), the verdict
  carries ``work_spread`` with its warning, and it is not decided unless the best run's lead holds at equal work
  (:mod:`rl_core.scaling.decide.work_spread`): a difference the spread could explain decides nothing.
- a leave-one-out grid's verdict also answers, for each removed component, the base against that variant
  (:mod:`server.assess.loo`: ``ablations``, ``ablation_summary``), from the same draws.

:func:`at_confidence` re-reads a stored verdict at another ``min_confidence`` without any fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rl_core.scaling import CurveFit, Policy, Recommendation
from rl_core.scaling.decide.grid_verdict import DEFAULT_CONFIDENCE, GridVerdict, Standing, standing
from rl_core.scaling.decide.work_spread import equal_work_confidence, spread
from server.assess import loo
from server.assess.advice import shown_advice
from server.assess.runread import recipe_key
from server.assess.verdict_schemas import RankedRun, VerdictOut, WorkKind, WorkSpreadOut
from server.lifecycle.status import ACTIVE
from server.store.models import Experiment, Run

__all__ = ["DEFAULT_CONFIDENCE", "at_confidence", "could_still_win", "undecided", "verdict"]


def _ranked(run: Run, rec: Recommendation, fit_status: str) -> RankedRun:
    n = rec.numbers
    action, _ = shown_advice(run.status, rec.action, rec.rule, rec.reason)
    return RankedRun(
        run_id=run.id,
        run_name=run.name,
        A=n.get("A"),
        A_lo=n.get("A_lo"),
        A_hi=n.get("A_hi"),
        B=n.get("B"),
        C_mid=n.get("C_mid"),
        V_budget=n.get("V_budget"),
        V_lo=n.get("V_lo"),
        V_hi=n.get("V_hi"),
        observed=bool(n.get("observed")),
        action=action,
        rule=rec.rule,
        fit_status=fit_status,
    )


def could_still_win(run: Run, resumable: bool) -> bool:
    """Queued and running runs, and stopped runs the policy may bring back: the gate must wait for their forecast."""
    return run.status in ACTIVE or run.status == "stopping" or resumable


def work_spread(
    decided_runs: Sequence[tuple[Run, Recommendation]],
    grid: GridVerdict,
    fits: Mapping[int, CurveFit],
    rates: Mapping[int, float],
    policy: Policy,
    unit: str,
    min_confidence: float = DEFAULT_CONFIDENCE,
    work: WorkKind = "steps",
) -> WorkSpreadOut | None:
    """The warning when the runs' ``work`` (tokens or steps) per compute unit (``rates``, by run id) differ by more
    than the policy's ``max_work_spread``, and whether the best run's lead holds at equal work; ``None`` within it."""
    names = {run.id: run.name for run, _ in decided_runs}
    counted = {rid: r for rid, r in rates.items() if rid in names}
    ratio = spread(counted)
    limit = policy.max_work_spread
    if ratio is None or limit is None or ratio <= limit:
        return None
    fast = max(counted, key=lambda k: counted[k])
    slow = min(counted, key=lambda k: counted[k])
    warning = (
        f"the runs got different work for the same compute: {work} per {unit} differ {ratio:.2f}× "
        f"(from {counted[slow]:.4g} for {names[slow]} to {counted[fast]:.4g} for {names[fast]}; more than "
        f"{limit:g}×); another program on the machine may have inflated some runs' compute"
    )
    q = p = None
    if grid.best is not None and grid.runner_up is not None:
        best, second = decided_runs[grid.best][0], decided_runs[grid.runner_up][0]
        if best.id in counted and second.id in counted:
            q = counted[best.id] / counted[second.id]
            if q > 1.0:
                budget = second.budget if second.budget is not None else fits[second.id].compute_max
                p = equal_work_confidence(grid, fits[second.id], float(budget), q, policy.forecast_comparison)
    out = WorkSpreadOut(
        ratio=ratio,
        threshold=limit,
        work=work,
        work_per_compute={names[k]: v for k, v in counted.items()},
        best_vs_runner_up=q,
        equal_work_confidence=p,
        warning=warning,
    )
    return spread_at_confidence(out, grid.runner_up is not None, min_confidence)


def spread_at_confidence(w: WorkSpreadOut, has_runner_up: bool, min_confidence: float) -> WorkSpreadOut:
    """Whether the best run's lead holds at equal work at ``min_confidence`` (pure: the stored numbers): it does
    when the best run got no more steps per unit than the runner-up, or when P(higher) at equal work reaches
    ``min_confidence``; it does not when either cannot be told."""
    if not has_runner_up:
        return w.model_copy(update={"robust": None})
    q, p = w.best_vs_runner_up, w.equal_work_confidence
    robust = q is not None and (q <= 1.0 or (p is not None and p >= min_confidence))
    return w.model_copy(update={"robust": robust})


def _spread_why(w: WorkSpreadOut, min_confidence: float) -> str:
    """Why a spread keeps the verdict undecided (its ``robust`` is False)."""
    head = f"the runs' steps per compute unit differ {w.ratio:.2f}× (more than {w.threshold:g}×)"
    if w.best_vs_runner_up is None:
        return f"{head} and the best run or the runner-up has too few points to check its lead at equal work"
    if w.equal_work_confidence is None:
        return (
            f"{head}; the best run got {w.best_vs_runner_up:.2f}× the runner-up's steps per unit and its lead "
            "cannot be checked at equal work"
        )
    return (
        f"{head}; the best run got {w.best_vs_runner_up:.2f}× the runner-up's steps per unit, and at equal work "
        f"(the runner-up at {w.best_vs_runner_up:.2f}× its budget) P(higher) = {w.equal_work_confidence:.2f} "
        f"< {min_confidence:g}: a difference the spread could explain"
    )


def verdict(
    experiment: Experiment,
    decided_runs: Sequence[tuple[Run, Recommendation]],
    grid: GridVerdict,
    fits: Mapping[int, CurveFit],
    resumable: frozenset[int] = frozenset(),
    units: Mapping[int, str] | None = None,
    min_confidence: float = DEFAULT_CONFIDENCE,
    rates: Mapping[int, float] | None = None,
    work: WorkKind = "steps",
    policy: Policy | None = None,
    recipes: Mapping[int, str | None] | None = None,
) -> VerdictOut:
    """The verdict of one assessment: ``grid`` is the decision's verdict (indices into ``decided_runs``);
    ``resumable``: ids of stopped runs ``auto_stop`` may resume; ``units``: each run's compute unit; ``rates``: each
    run's ``work`` (tokens or steps) per compute unit (runs with enough points), checked against
    ``policy.max_work_spread``; ``recipes``: each run's recipe key as read (else read from the runs)."""
    v = _verdict(experiment, decided_runs, grid, fits, resumable, units, recipes)
    if v.state == "units":  # nothing is compared across units
        return v
    unit_groups = sorted(set((units or {}).values()))
    items = loo.ablations(decided_runs, grid, min_confidence)
    unit = unit_groups[0] if unit_groups else "compute unit"
    spread_out = work_spread(decided_runs, grid, fits, rates or {}, policy or Policy(), unit, min_confidence, work)
    extra = v.model_copy(update={"ablations": items, "ablation_summary": loo.summary(items), "work_spread": spread_out})
    return at_confidence(extra, min_confidence)


def _verdict(
    experiment: Experiment,
    decided_runs: Sequence[tuple[Run, Recommendation]],
    grid: GridVerdict,
    fits: Mapping[int, CurveFit],
    resumable: frozenset[int],
    units: Mapping[int, str] | None,
    recipes: Mapping[int, str | None] | None = None,
) -> VerdictOut:
    """The verdict's numbers and its ``summary`` (where it stands is :func:`at_confidence`'s)."""
    finished = all(run.status not in ACTIVE | {"stopping"} for run, _ in decided_runs)
    ordered = [decided_runs[i] for i in grid.order]
    ranked_ids = {run.id for run, _ in ordered}
    ranking = [_ranked(run, rec, fits[run.id].status) for run, rec in ordered]
    ranking += [_ranked(run, rec, fits[run.id].status) for run, rec in decided_runs if run.id not in ranked_ids]
    waiting = [
        run.name for run, rec in decided_runs if run.id not in ranked_ids and could_still_win(run, run.id in resumable)
    ]
    unit_groups = sorted(set((units or {}).values()))
    if len(unit_groups) > 1:
        by_unit = {u: [run.name for run, _ in decided_runs if (units or {}).get(run.id) == u] for u in unit_groups}
        reason = "runs report compute in different units, which are never compared: " + "; ".join(
            f"{u}: {_names(n, 3)}" for u, n in by_unit.items()
        )
        return undecided(experiment.id, reason, finished).model_copy(update={"state": "units"})
    best = None if grid.best is None else decided_runs[grid.best][0]
    second = None if grid.runner_up is None else decided_runs[grid.runner_up][0]
    base = undecided(experiment.id, "", finished, waiting).model_copy(
        update={
            "best_run_id": None if best is None else best.id,
            "best_run_name": None if best is None else best.name,
            "runner_up_id": None if second is None else second.id,
            "runner_up_name": None if second is None else second.name,
            "basis": grid.basis if second is not None else "none",
            "difference_at_budget": grid.difference,
            "confidence": grid.confidence,
            "ranking": ranking,
            "others_dominated": grid.others_dominated,
        }
    )
    tail = f"; waiting for {_names(waiting)}" if waiting else ""
    if best is None:
        why = f"no run has a usable forecast yet; waiting for {_names(waiting)}" if waiting else ""
        return _said(base, why or "no run has a usable fit yet")
    if second is None or grid.best is None or grid.runner_up is None:
        if grid.others_dominated:
            return _said(base, f"{best.name} is the one recipe left: every run of another recipe was stopped")
        if len(ordered) > 1:
            why = f"only one recipe has a usable fit (its seeds are not compared with each other){tail}"
        else:
            why = f"only one run has a usable fit; nothing to compare it with yet{tail}"
        return _said(base, why)
    v_best = decided_runs[grid.best][1].numbers["V_budget"]
    v_second = decided_runs[grid.runner_up][1].numbers["V_budget"]
    if grid.basis == "observed":
        head = (
            f"{best.name} ended at {v_best:.3f} at the budget vs {second.name}'s {v_second:.3f} (observed); "
            f"P(higher) = {grid.confidence:.2f} against the evaluation noise"
        )
    else:
        head = (
            f"{best.name} forecasts {v_best:.3f} at the budget vs {second.name}'s {v_second:.3f}; "
            f"P(higher at the budget) = {grid.confidence:.2f}"
        )
    recipe = (lambda r: recipes[r.id]) if recipes is not None else recipe_key
    if recipe(best) is None and recipe(second) is None:
        head += " (from the fits' uncertainty alone: single runs carry no seed-to-seed spread)"
    return _said(base, head)


def _said(v: VerdictOut, summary: str) -> VerdictOut:
    return v.model_copy(update={"summary": summary, "reason": summary})


def undecided(experiment_id: int, reason: str, finished: bool, waiting_for: Sequence[str] = ()) -> VerdictOut:
    """A verdict with nothing ranked: no run can be compared yet, for ``reason``."""
    return VerdictOut(
        experiment_id=experiment_id,
        reason=reason,
        finished=finished,
        waiting_for=list(waiting_for),
        summary=reason,
        state="no_comparison",
    )


def _names(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def at_confidence(v: VerdictOut, min_confidence: float, decide_early: bool = False) -> VerdictOut:
    """The stored verdict read at ``min_confidence`` by the one decided rule
    (:func:`rl_core.scaling.decide.grid_verdict.standing`) with its ``waiting_for``: decided only when nothing it
    waits for is left (unless ``decide_early``), the probability (or dominance) clears the bar, and no spread of the
    runs' steps per compute unit could explain the best run's lead; the leave-one-out findings are re-read at
    ``min_confidence`` too. ``state``, ``decided_by`` and ``decided_early`` say where it stands; ``reason`` is the
    ``summary`` followed by that in brackets. Pure: no fit, no database."""
    if v.ablations:
        items = [loo.at_confidence(a, min_confidence) for a in v.ablations]
        v = v.model_copy(update={"ablations": items, "ablation_summary": loo.summary(items)})
    if v.work_spread is not None:
        w = spread_at_confidence(v.work_spread, v.runner_up_id is not None, min_confidence)
        v = v.model_copy(update={"work_spread": w})
    if v.state == "units":
        return v
    robust = None if v.work_spread is None else v.work_spread.robust
    has_best = v.best_run_id is not None
    s = standing(
        has_best,
        v.confidence,
        v.others_dominated,
        min_confidence,
        v.waiting_for,
        decide_early=decide_early,
        lead_holds_at_equal_work=robust,
    )
    fields = {"state": s.state, "decided": s.decided, "decided_by": s.decided_by, "decided_early": s.early}
    if s.state == "no_comparison":
        return v.model_copy(update=fields)
    why = _standing_why(v, s, min_confidence)
    # A verdict stored before ``summary`` existed keeps its reason as it was written.
    reason = v.reason if v.summary is None else f"{v.summary} [{why}]"
    return v.model_copy(update={**fields, "reason": reason})


def _standing_why(v: VerdictOut, s: Standing, min_confidence: float) -> str:
    """Where the verdict stands, in words (the bracket after its summary)."""
    if s.state == "waiting":
        return (
            f"not decided: waiting for {_names(v.waiting_for)}, which could still win and have no usable forecast yet"
        )
    if s.state == "work_spread" and v.work_spread is not None:
        return f"not decided: {_spread_why(v.work_spread, min_confidence)}"
    if s.state == "decided":
        why = f"≥ {min_confidence:g}" if s.decided_by == "confidence" else "every other recipe is dominated or stopped"
        if s.early:
            why += f"; decided early, ignoring {_names(v.waiting_for)}, which have no forecast yet"
        return why
    return f"< {min_confidence:g}: {'every run has finished; not shown to differ' if v.finished else 'not decided yet'}"
