"""Which runs of a grid to stop, keep or scale: the one decision function the service runs and the replay measures.

:func:`decide_grid` takes every run's points (and which runs are live), fits them, and applies, in order:

1. the observed-value rules users configure (:mod:`.rules`: threshold, patience, divergence,
   guards on other metrics), each with its own noise protection;
2. each run's own forecast (:func:`.recommend.recommend_run`: falling, plateaued, flat, unstable,
   scale, continue);
3. the grid comparison, on each run's value **at the budget** (posterior draws of the forecast there, not the
   ceiling A; once a run has reached its budget or finished, draws of what it observed, :mod:`.grid_verdict`):
   - *dominated*: P(V_i < V_j - margin) >= ``p_stop`` for some comparator j;
   - *cannot matter*: E[max(V_i - V_lead, 0)] < ``min_expected_gain``, where lead is the best comparator of another
     recipe: even optimistically, keeping i buys less than the evaluation noise.
   Comparators (the runs that may stop another) are observed values and fits whose ceiling is off the A = 1 bound;
   the expected-gain rule also needs both values precise (observed, or the ceiling identified): a ceiling on the
   bound or too wide is not evidence of anything. The run under test has its draws floored at its recent observed
   level (the model never falls), so a posterior lying below the data can never stop a run; a run that has fallen
   from its peak by more than the noise allows has its draws capped at its recent level (:mod:`.fallen`), so a
   collapsing run's remembered peak neither stops others nor keeps them stopped, and it is no comparator for the
   equal-compute rules of step 4.
4. the observed values at equal compute, for live runs the forecast did not stop (no fit needed): *behind*
   (:mod:`.matched_compute`: trailing another run by more than the grid's noise allows) and *rung*
   (:mod:`.rungs`: successive halving, outside the top 1/η of the recipes at an ASHA rung). Neither
   stops a protected run or a run whose identified forecast reaches the best other recipe's.
5. the compute target (:mod:`.compute_target`, off by default): with ``Policy.compute_target`` below 0.5, a live
   run ranked (by value at the budget) below a shrinking successive-halving-shaped share of the grid is stopped; it
   protects the leader only (the best comparator may be stopped: the risk the target accepts), and any run whose
   value at the budget stands above the leader's with probability ``target_keep_p``. Above 0.5 the knob holds
   every stop back instead and asks each for more evidence (:func:`.compute_target.hold_back`, wider margins);
   :func:`.compute_target.effective_policy` resolves it once.

The *leader* is the run with the highest median value at the budget among every run valued (one rule, shared with
the verdict, :mod:`.grid_verdict`: a ceiling on the bound does not keep a run from leading). The *protected* runs,
which no grid rule stops, are the leader and the best comparator.

Invariants: a stop by 2, 3, 4 or 5 must hold on ``hold`` consecutive evaluations (the decision is also
made on every run's points without its newest evaluation, and both must say stop); nothing stops before the run
has used ``min_fraction`` of its budget (the compute target's stops alone: ``target_start``, where set); the grid
comparison never stops the last ``min_live`` live runs and never
stops a protected run (the compute target, step 5, protects the leader only); the leader (rule ``leader``) is
named whether it is live or completed, so a finished grid keeps its ranking; each recommendation's reason is written
from the numbers stored beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rl_core.scaling.decide.compute_target import effective_policy
from rl_core.scaling.decide.fallen import Fall, capped_at_recent, fallen_from_peak
from rl_core.scaling.decide.gates import Hold, TooEarly, held_back
from rl_core.scaling.decide.grid_run import (
    GridRun,
    RunStatus,
    best_of,
    identified,
    medians_of,
    on_bound,
    replicates,
)
from rl_core.scaling.decide.grid_verdict import GridVerdict, grid_verdict, observed_draws, reached_budget
from rl_core.scaling.decide.matched_compute import pooled_noise
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Action, Recommendation, RunState, recommend_run
from rl_core.scaling.decide.resume import resume_candidates
from rl_core.scaling.decide.rules import check_rules
from rl_core.scaling.decide.stop_rules import STOP_RULES, StopContext, fall_note
from rl_core.scaling.fit.calibration import Comparison, ForecastCalibration, comparison_calibration, forecast_draws
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, fit_curve
from rl_core.scaling.fit.model import FloatArray

__all__ = [
    "GridAssessment",
    "GridFitter",
    "GridRun",
    "RunStatus",
    "assess_grid",
    "decide_grid",
    "identified",
    "per_run_fitter",
    "probability_higher",
    "recommend_set",
    "replicates",
    "value_draws",
]

_DRAW_SEED = 12345
#: Every run's value draws are brought to this many (resampled if its posterior has another count) so they pair.
N_DRAWS = 1000
#: Where a fit keeps its value draws by (budget, salt, comparison), in its ``__dict__`` beside its frozen fields.
_DRAWS_MEMO = "_value_draws"
#: A run's value at the budget is floored at the mean of its last this many evaluations (the sigmoid never falls).
FLOOR_POINTS = 3


GridFitter = Callable[[Sequence[tuple[FloatArray, FloatArray]]], list[CurveFit]]


def per_run_fitter(options: FitOptions | None = None) -> GridFitter:
    """Fits every run on its own with :func:`fit_curve`."""
    opts = options or FitOptions()
    return lambda curves: [fit_curve(x, y, opts) for x, y in curves]


def value_draws(
    fit: CurveFit, budget: float, salt: int = 0, comparison: Comparison | ForecastCalibration = "calibrated"
) -> FloatArray | None:
    """:data:`N_DRAWS` draws of the curve's value at ``budget`` through a comparison's calibration
    (:func:`~rl_core.scaling.fit.calibration.comparison_calibration`, or a calibration given as such), or ``None``
    without a posterior.

    Fits made with the same seed draw from the same random stream, so two runs' draws must not be paired in their
    own order: each is shuffled by a permutation of its own (``salt``, e.g. the run's index), which makes pairs of
    two runs' draws independent."""
    if fit.samples is None or fit.params is None or not fit.usable:
        return None
    if isinstance(comparison, ForecastCalibration):
        return _value_draws(fit, budget, salt, comparison)
    # Kept beside the fit's frozen fields (as its summaries are, :func:`~rl_core.scaling.fit.summary.summarize`): a
    # decision draws every run's value at the budget twice (the newest points and the hold's), and a caller that keeps
    # its fits (the Optuna pruner, between two reports) draws them again at every decision: a 30-run decision spent a
    # third of its time in these draws. A copy each time: callers floor and cap the draws in place.
    memo: dict[tuple[float, int, str], FloatArray | None] = fit.__dict__.setdefault(_DRAWS_MEMO, {})
    key = (float(budget), int(salt), str(comparison))
    if key not in memo:
        memo[key] = _value_draws(fit, budget, salt, comparison_calibration(comparison))
    found = memo[key]
    return None if found is None else found.copy()


def _value_draws(fit: CurveFit, budget: float, salt: int, cal: ForecastCalibration) -> FloatArray | None:
    drawn = forecast_draws(fit, np.array([budget], dtype=np.float64), "curve", cal)
    if drawn is None:
        return None
    v = drawn[:, 0]
    rng = np.random.default_rng((_DRAW_SEED, salt))
    return np.asarray(rng.permutation(v) if v.size == N_DRAWS else rng.choice(v, N_DRAWS, replace=v.size < N_DRAWS))


def probability_higher(
    fit_a: CurveFit,
    budget_a: float | None,
    fit_b: CurveFit,
    budget_b: float | None,
    rec_a: Recommendation | None = None,
    rec_b: Recommendation | None = None,
    comparison: Comparison = "calibrated",
) -> float:
    """P(run a's value at its budget > run b's), from independent posterior draws (each floored at the recent level
    its recommendation stored, if any); NaN without posteriors or budgets."""
    if budget_a is None or budget_b is None:
        return float("nan")
    va, vb = value_draws(fit_a, budget_a, 0, comparison), value_draws(fit_b, budget_b, 1, comparison)
    if va is None or vb is None:
        return float("nan")
    for v, rec in ((va, rec_a), (vb, rec_b)):
        floor = None if rec is None else rec.numbers.get("recent_level")
        if floor is not None:
            np.maximum(v, floor, out=v)
    return float(np.mean(va > vb))


def _summary(v: FloatArray, level: float) -> tuple[float, float, float]:
    lo, med, hi = np.quantile(v, [(1 - level) / 2, 0.5, (1 + level) / 2])
    return float(med), float(lo), float(hi)


def _budget_of(run: GridRun) -> float:
    return float(run.budget) if run.budget is not None else float(run.x[-1]) if run.x.size else 0.0


@dataclass(frozen=True)
class GridAssessment:
    """What :func:`assess_grid` answers: every run's recommendation, in order, and the grid's verdict (from the
    current fits, the same draws the recommendations compare)."""

    recommendations: list[Recommendation]
    verdict: GridVerdict


@dataclass(frozen=True)
class _Valuation:
    """Every run's value at the budget in one decision: the draws runs are compared on and what may stop another.

    A run that has reached its budget (or finished) is valued by what it observed, not by a forecast; a fallen run's
    draws are capped at its recent level (:mod:`.fallen`). Comparators are observed values and fits off the A = 1
    bound; ``precise`` are those whose value is observed or whose ceiling is identified."""

    runs: Sequence[GridRun]
    fits: Sequence[CurveFit]
    noise: float | None
    falls: dict[int, Fall | None]
    observed: frozenset[int]
    draws: dict[int, FloatArray]
    """The draws of every run that is not stopped, under ``policy.forecast_comparison``."""
    comparators: list[int]
    precise: frozenset[int]

    def capped(self, i: int, comparison: Comparison) -> FloatArray | None:
        if i in self.observed:
            return observed_draws(self.runs[i], self.noise, FLOOR_POINTS, N_DRAWS, i)
        v = value_draws(self.fits[i], _budget_of(self.runs[i]), i, comparison)
        return None if v is None else capped_at_recent(v, self.falls[i])

    def of_stopped(self, comparison: Comparison) -> dict[int, FloatArray]:
        """Draws of the stopped runs that have them."""
        return {
            i: v
            for i, r in enumerate(self.runs)
            if r.status == "stopped" and r.x.size
            for v in [self.capped(i, comparison)]
            if v is not None
        }


def _valuation(runs: Sequence[GridRun], fits: Sequence[CurveFit], policy: Policy) -> _Valuation:
    noise = pooled_noise([(r.x, r.y) for r in runs if r.x.size])
    falls = {i: fallen_from_peak(r.y, noise, FLOOR_POINTS, policy.fall) for i, r in enumerate(runs)}
    observed = frozenset(i for i, r in enumerate(runs) if r.status != "stopped" and reached_budget(r, FLOOR_POINTS))
    partial = _Valuation(runs, fits, noise, falls, observed, {}, [], frozenset())
    draws = {
        i: v
        for i, r in enumerate(runs)
        if r.status != "stopped" and r.x.size
        for v in [partial.capped(i, policy.forecast_comparison)]
        if v is not None
    }
    comparators = [i for i in draws if i in observed or (not on_bound(fits[i]) and fits[i].status == "ok")]
    precise = frozenset(i for i in comparators if i in observed or identified(fits[i], policy))
    return replace(partial, draws=draws, comparators=comparators, precise=precise)


def _kept_in_grid(own: Sequence[Recommendation]) -> list[Recommendation]:
    """In a grid a plateau alone says nothing about being the best run: its own stop becomes a ``continue``."""
    if len(own) < 2:
        return list(own)
    return [
        replace(rec, action="continue", reason=f"{rec.reason}; kept while it may be the best")
        if rec.action == "stop" and rec.rule in ("plateau", "flat")
        else rec
        for rec in own
    ]


def _with_values(own: Sequence[Recommendation], val: _Valuation, policy: Policy) -> list[Recommendation]:
    """Each valued run's recommendation with its value and interval at the budget (what the run shows: the
    calibrated draws unless ``raw``; the spread differs from the compared draws under ``blended``), its fall and its
    basis."""
    shown_as: Comparison = "raw" if policy.forecast_comparison == "raw" else "calibrated"
    out = list(own)
    for i, v in val.draws.items():
        shown = v if shown_as == policy.forecast_comparison else val.capped(i, shown_as)
        med, lo, hi = _summary(v if shown is None else shown, val.fits[i].level)
        fell = val.falls[i]
        fall_numbers = {} if fell is None else {"peak_level": fell.peak, "fall_from_peak": fell.drop}
        basis = {"observed": 1.0} if i in val.observed else {}
        out[i] = replace(
            out[i], numbers={**out[i].numbers, "V_budget": med, "V_lo": lo, "V_hi": hi, **fall_numbers, **basis}
        )
    return out


def _verdict(
    val: _Valuation, unranked: Mapping[int, FloatArray], out: Sequence[Recommendation], policy: Policy
) -> GridVerdict:
    """The verdict of these draws; the stopped runs (``unranked``) are not ranked but keep their forecast at the
    budget for its contrasts (what a leave-one-out variant the rules stopped costs)."""
    runs = val.runs
    floors = {i: float(np.mean(runs[i].y[-FLOOR_POINTS:])) for i in (*val.draws, *unranked) if i not in val.observed}
    return grid_verdict(
        runs,
        val.draws,
        floors,
        val.observed,
        frozenset(i for i, rec in enumerate(out) if rec.rule == "dominated"),
        lambda i, j: replicates(runs[i], runs[j], policy),
        unranked,
    )


def _named_leader(lead: int, val: _Valuation, rec: Recommendation) -> Recommendation:
    """The leader's recommendation (rule ``leader``), named whether it is live or completed: a completed leader keeps
    its own action (nothing acts on a finished run, but the grid's leader stays named)."""
    med = float(np.median(val.draws[lead]))
    n = len(val.draws)
    among = "the only run with a value" if n == 1 else f"best of {n} runs"
    how = "by its observed value at the budget" if lead in val.observed else "by forecast at budget"
    reason = f"{among} {how} ({med:.3f}){fall_note(val.falls[lead])}; {rec.reason}"
    live = val.runs[lead].status == "live"
    action: Action = rec.action if not live else "scale" if rec.action == "scale" else "continue"
    return Recommendation(rec.run_id, action, reason, {**rec.numbers, "leader": 1.0}, "leader")


def _compare(
    runs: Sequence[GridRun], fits: Sequence[CurveFit], own: list[Recommendation], policy: Policy
) -> tuple[list[Recommendation], GridVerdict]:
    """Step 3 of the module docstring on one set of fits (no hold), and the verdict those draws give."""
    val = _valuation(runs, fits, policy)
    own = _kept_in_grid(own)
    out = _with_values(own, val, policy)
    # The one leader rule (:mod:`.grid_verdict`): the highest value at the budget among every run valued, a ceiling on
    # the bound included. Neither it nor the best comparator (the leader among values that are evidence) is stopped.
    medians = medians_of(val.draws)
    lead = best_of(list(val.draws), medians) if val.draws else None
    comparator_lead = best_of(val.comparators, medians) if val.comparators else None
    protected = frozenset(i for i in (lead, comparator_lead) if i is not None)
    ctx = StopContext(
        runs, fits, own, [rec.numbers for rec in out], policy, val.draws, val.comparators, val.precise, lead,
        protected, val.falls, val.noise, FLOOR_POINTS,
    )  # fmt: skip
    stops = STOP_RULES.candidates(ctx)
    for i, numbers in ctx.notes.items():  # the runs compared but not stopped keep the comparison's numbers
        out[i] = replace(out[i], numbers=numbers)
    for _, i, rec in stops:
        out[i] = replace(rec, numbers={**out[i].numbers, **rec.numbers})  # keeps the forecast at the budget
    stopped = val.of_stopped(policy.forecast_comparison)
    by_rule = {i: v for i, v in stopped.items() if runs[i].stop_rule is not None}
    for i, rec in resume_candidates(runs, fits, val.draws, val.comparators, by_rule, FLOOR_POINTS, policy).items():
        out[i] = rec
    verdict = _verdict(val, stopped, out, policy)
    if lead is not None:
        out[lead] = _named_leader(lead, val, out[lead])
    return out, verdict


def _decide_once(
    runs: Sequence[GridRun], fits: Sequence[CurveFit], policy: Policy
) -> tuple[list[Recommendation], GridVerdict]:
    own = [
        recommend_run(RunState(r.run_id, f, float(r.x[-1]) if r.x.size else 0.0, r.budget), policy)
        for r, f in zip(runs, fits, strict=True)
    ]
    return _compare(runs, fits, own, policy)


def _observed_rule_stop(run: GridRun, rec: Recommendation, policy: Policy) -> Recommendation | None:
    """A stop by one of the observed-value rules users configure (:mod:`.rules`), which no gate holds back."""
    hit = check_rules(policy.rules, run.x, run.y, run.metrics) if run.status != "completed" else None
    if hit is None:
        return None
    return Recommendation(run.run_id, "stop", hit.reason, {**rec.numbers, **hit.numbers}, hit.rule)


def decide_grid(
    runs: Sequence[GridRun],
    policy: Policy | None = None,
    fitter: GridFitter | None = None,
    fits: Sequence[CurveFit] | None = None,
) -> list[Recommendation]:
    """Recommendations for every run, in order (see the module docstring). ``fits`` are the current fits when the
    caller has them; ``fitter`` fits the grid (default: each run on its own with :func:`fit_curve`)."""
    return assess_grid(runs, policy, fitter, fits).recommendations


def assess_grid(
    runs: Sequence[GridRun],
    policy: Policy | None = None,
    fitter: GridFitter | None = None,
    fits: Sequence[CurveFit] | None = None,
) -> GridAssessment:
    """:func:`decide_grid`'s recommendations and the verdict of the same decision (:mod:`.grid_verdict`)."""
    pol = effective_policy(policy or Policy())
    fit = fitter or per_run_fitter()
    now_fits = list(fits) if fits is not None else fit([(r.x, r.y) for r in runs])
    now, verdict = _decide_once(runs, now_fits, pol)
    before: list[Recommendation] | None = None
    if pol.hold >= 2 and any(rec.action in ("stop", "resume") for rec in now):
        # A stopped run has no newest evaluation: its points stay as they are.
        prev_runs = [r if r.status == "stopped" else replace(r, x=r.x[:-1], y=r.y[:-1]) for r in runs]
        before = _decide_once(prev_runs, fit([(r.x, r.y) for r in prev_runs]), pol)[0]
    gates = (TooEarly(pol), Hold(before))
    out = [
        _observed_rule_stop(run, rec, pol) or held_back(gates, k, run, rec)
        for k, (run, rec) in enumerate(zip(runs, now, strict=True))
    ]
    return GridAssessment(out, verdict)


def recommend_set(states: Sequence[RunState], policy: Policy | None = None) -> list[Recommendation]:
    """Recommendations for competing runs given only their current fits (no hold, every run live): the grid
    comparison of :func:`decide_grid` without the points. Prefer :func:`decide_grid` when the points are at hand."""
    pol = effective_policy(policy or Policy())
    runs = [
        GridRun(s.run_id, np.array([s.compute_used], dtype=np.float64), np.zeros(1), "live", s.budget) for s in states
    ]
    return _compare(runs, [s.fit for s in states], [recommend_run(s, pol) for s in states], pol)[0]
