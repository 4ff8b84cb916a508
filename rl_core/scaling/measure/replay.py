"""Replaying a recorded ablation grid under a stop policy: how much compute it saves and what it costs.

All runs of the grid start together with one budget (in the x unit). The replay walks the evaluation times (every
x at which some run has a point, up to the budget); at each one the policy sees every run's points so far and may
stop live runs. A run stopped at x has used x of compute and reports nothing after it.

Measures (decisions.md's): ``compute`` = compute used / compute of running every run to the budget; the ``pick`` =
the best *completed* run (never stopped) by its own final value; ``regret`` = the grid's best final value minus the
pick's final value. A run's final value is the mean of its last :data:`FINAL_POINTS` evaluations up to the budget
(evaluation noise must not decide the regret). If every run was stopped, the pick is the best stopped run by the
mean of its last evaluations before its stop. "Never stop" therefore has compute 1 and regret 0.

Policies are callables ``policy(view) -> {run: reason}``, created fresh per replay by a factory (so a policy may
keep state, as Optuna's pruners do). :func:`replay_sequential` replays the way Optuna users run trials: one after
another, each seeing the completed ones (for pruners that only compare with completed trials).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rl_core.contracts.records import as_json
from rl_core.scaling.decide.grid_decisions import GridFitter, GridRun, assess_grid
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.resume import RESUMABLE_RULES
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.curves_io import CurveFileError, as_pass_rate, read_curve_table

#: A run's final value is the mean of its last this many evaluations (up to the budget).
FINAL_POINTS = 3
#: A seed at the end of a run name, after a separator: ``lr1e-4_s0``, ``base-seed1``, ``lr=1e-4,seed=2`` (the
#: service's cell names). Runs whose names agree up to it are replicates of one recipe.
SEED_SUFFIX = re.compile(r"[_\-,.](?:s|seed)=?\d+$", re.IGNORECASE)


@dataclass(frozen=True)
class RunCurve:
    """One run's recorded evaluations: ``x`` strictly increasing (compute), ``y`` the pass rate, and other metrics
    logged at the same evaluations (for guard rules), each the same length as ``x`` (NaN where not logged)."""

    name: str
    x: FloatArray
    y: FloatArray
    metrics: Mapping[str, FloatArray] = field(default_factory=dict)

    def upto(self, x_max: float) -> RunCurve:
        """The points with x <= ``x_max``."""
        return self.first(int(np.searchsorted(self.x, x_max, side="right")))

    def first(self, k: int) -> RunCurve:
        """The first ``k`` evaluations."""
        return RunCurve(self.name, self.x[:k], self.y[:k], {m: v[:k] for m, v in self.metrics.items()})

    def final(self, x_max: float | None = None) -> float:
        """Mean of the last :data:`FINAL_POINTS` pass rates up to ``x_max`` (NaN without points)."""
        y = self.y if x_max is None else self.upto(x_max).y
        return float(np.mean(y[-FINAL_POINTS:])) if y.size else float("nan")


@dataclass(frozen=True)
class GridView:
    """What a policy sees at one evaluation: every run's points so far (a stopped run's up to its stop), which runs
    are still live, the current x and the common budget."""

    x_now: float
    budget: float
    runs: Mapping[str, RunCurve]
    live: frozenset[str]
    stopped: Mapping[str, float]
    """Runs already stopped, with the x at which they stopped."""


@dataclass(frozen=True)
class VerdictStep:
    """What the service would show at one evaluation: the verdict's best run, whether it is decided, and the advice
    given (runs told to stop or to scale, whether or not the replay enacts the stops)."""

    x: float
    best: str | None
    decided: bool
    confidence: float | None
    basis: str
    stop: tuple[str, ...] = ()
    scale: tuple[str, ...] = ()


@dataclass(frozen=True)
class Moves:
    """A policy's answer when it also resumes runs: runs to stop and stopped runs to resume, each with its reason;
    a policy with a verdict (scalerl's) also says what it would show (:class:`VerdictStep`)."""

    stop: Mapping[str, str] = field(default_factory=dict)
    resume: Mapping[str, str] = field(default_factory=dict)
    verdict: VerdictStep | None = None


StopPolicy = Callable[[GridView], "Mapping[str, str] | Moves"]
"""A policy answers the runs to stop (run -> reason), or :class:`Moves` when it also resumes stopped runs."""
PolicyFactory = Callable[[Sequence[RunCurve], float], StopPolicy]


@dataclass(frozen=True)
class RunOutcome:
    name: str
    stopped_at: float | None
    reason: str | None
    compute: float
    final: float
    """The run's true final value at the budget (what it would have reached had it run)."""
    resumed_from: tuple[float, ...] = ()
    """The x at which the run had been stopped each time it was resumed (its compute goes on from there)."""


@dataclass(frozen=True)
class ReplayResult:
    policy: str
    budget: float
    compute: float
    pick: str
    regret: float
    best: str
    runs: tuple[RunOutcome, ...]
    orders: int = 1
    """How many replays (random trial orders) the numbers average over; ``regret_worst``/``compute_worst`` are the
    worst of them."""
    regret_worst: float | None = None
    compute_worst: float | None = None
    elapsed: float = 1.0
    """When the last run ended, as a fraction of the budget: above 1 when resumed runs finish late."""
    recipe_regret: float | None = None
    """On a grid with seeds of one recipe (:func:`recipe_regret`): the best recipe's mean final over its seeds minus
    that of the recipe a researcher would pick from what the policy let them see; ``None`` on a grid without
    seeds."""
    verdicts: tuple[VerdictStep, ...] = ()
    """The verdict at every evaluation (policies with a verdict only), scored by
    :mod:`rl_core.scaling.measure.verdict_score`."""

    def to_dict(self) -> dict[str, object]:
        """Every field as JSON; ``runs`` keyed by run name."""
        return {**as_json(self, skip=("runs",)), "runs": {r.name: as_json(r, skip=("name",)) for r in self.runs}}


class ReplayError(ValueError):
    """A grid that cannot be replayed; the message says what is wrong."""


def load_grid(paths: Sequence[str | Path], x_column: str | None = None, y_column: str | None = None) -> list[RunCurve]:
    """One run per CSV (named after the file's stem), as ``scalerl fit`` reads them; other numeric columns are kept
    as metrics. Rows without a finite x or pass rate are dropped; duplicate x keep the last row. y is a pass rate
    as ``scalerl fit`` reads it (:func:`.curves_io.as_pass_rate`: percentages divided by 100, other
    values outside [0, 1] an error: the policies' margins are in pass-rate units), and compute is never negative."""
    if len(paths) < 2:
        raise ReplayError(f"a grid needs at least 2 runs (files), got {len(paths)}")
    runs: list[RunCurve] = []
    for path in paths:
        table = read_curve_table(path)
        xc = x_column or table.default_x()
        yc = y_column or table.default_y()
        if xc == yc:
            raise CurveFileError(f"{Path(path).name}: the x and y columns are both {xc!r}; name them with --x/--y")
        x, y = table.column(xc), table.column(yc)
        ok = np.isfinite(x) & np.isfinite(y)
        order = np.argsort(x[ok], kind="stable")
        xs, ys = x[ok][order], y[ok][order]
        if xs.size and xs[0] < 0:
            raise ReplayError(
                f"{Path(path).name}: negative compute ({xs[0]:g}); the x column must be compute used, >= 0"
            )
        ys, _notes = as_pass_rate(ys, f"{Path(path).name}: the pass-rate column {yc!r}")
        keep = np.append(np.diff(xs) > 0, True)  # last of equal x
        metrics = {c: v[ok][order][keep] for c, v in table.values.items() if c not in (xc, yc)}
        if int(keep.sum()) < FINAL_POINTS + 1:
            raise ReplayError(f"{Path(path).name}: {int(keep.sum())} evaluations; a replay needs at least 4")
        runs.append(RunCurve(Path(path).stem, xs[keep], ys[keep], metrics))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ReplayError(f"two files have the same name (stem): {sorted(names)}")
    return runs


def default_budget(runs: Sequence[RunCurve]) -> float:
    """The last x common to every run (the smallest of the runs' last x)."""
    return float(min(r.x[-1] for r in runs))


def _check_budget(runs: Sequence[RunCurve], budget: float) -> None:
    short = [r.name for r in runs if r.x[-1] < budget]
    if short:
        raise ReplayError(
            f"--until {budget:g} is past the last evaluation of {short}; at most {default_budget(runs):g}"
        )
    late = [r for r in runs if r.x[0] > budget]
    if late:
        first = ", ".join(f"{r.name} starts at {r.x[0]:g}" for r in late)
        raise ReplayError(
            f"the runs have no common x range: {first}, after the budget {budget:g} (the last x common to all runs "
            "unless --until is given); replay runs of one grid, logged against the same compute axis"
        )
    few = [r.name for r in runs if r.upto(budget).x.size < FINAL_POINTS + 1]
    if few:
        raise ReplayError(f"runs {few} have fewer than {FINAL_POINTS + 1} evaluations up to {budget:g}")


def _pick(runs: Sequence[RunCurve], stopped: Mapping[str, float], budget: float) -> str:
    completed = [r for r in runs if r.name not in stopped]
    if completed:
        return max(completed, key=lambda r: r.final(budget)).name
    return max(runs, key=lambda r: r.final(stopped[r.name])).name


def recipe_regret(finals: Mapping[str, float], seen: Mapping[str, float], completed: Collection[str]) -> float | None:
    """Regret at the level of recipes, for a grid with seeds (runs whose names agree up to a seed suffix,
    :func:`replicate_key`; a run without one is a recipe of its own). A recipe's true value is the mean final of all
    its seeds (``finals``). The recipe picked is, among the recipes with a completed seed, the one whose seeds stand
    best on average as the policy saw them (``seen``: a completed run's final, a stopped run's level at its stop):
    what a researcher who ran seeds would pick. The regret is the best recipe's value minus the picked recipe's;
    ``None`` when no recipe has two seeds, or nothing completed. Per-run regret rewards keeping the luckiest seed,
    even of a recipe whose other seeds collapse; this asks whether the recipe left standing is the best one."""

    def recipe(name: str) -> str:
        return replicate_key(name) or f"run:{name}"

    groups: dict[str, list[str]] = {}
    for name in finals:
        groups.setdefault(recipe(name), []).append(name)
    candidates = {recipe(name) for name in completed}
    if not candidates or not any(len(v) >= 2 for v in groups.values()):
        return None
    truth = {k: float(np.mean([finals[n] for n in names])) for k, names in groups.items()}
    picked = max(candidates, key=lambda k: float(np.mean([seen[n] for n in groups[k]])))
    return max(truth.values()) - truth[picked]


def outcome(
    policy: str,
    runs: Sequence[RunCurve],
    budget: float,
    stopped: Mapping[str, float],
    reasons: Mapping[str, str],
    resumed: Mapping[str, Sequence[float]] | None = None,
    elapsed: float = 1.0,
    verdicts: Sequence[VerdictStep] = (),
) -> ReplayResult:
    """The measures of one replay, from where each run was stopped (and, for runs resumed, from where)."""
    back = resumed or {}
    finals = {r.name: r.final(budget) for r in runs}
    best = max(finals, key=lambda n: finals[n])
    pick = _pick(runs, stopped, budget)
    used = {r.name: min(stopped.get(r.name, budget), budget) for r in runs}
    outcomes = tuple(
        RunOutcome(
            r.name, stopped.get(r.name), reasons.get(r.name), used[r.name], finals[r.name], tuple(back.get(r.name, ()))
        )
        for r in runs
    )
    return ReplayResult(
        policy=policy,
        budget=budget,
        compute=sum(used.values()) / (budget * len(runs)),
        pick=pick,
        regret=finals[best] - finals[pick],
        best=best,
        runs=outcomes,
        elapsed=elapsed,
        recipe_regret=recipe_regret(
            finals,
            {r.name: r.final(min(stopped.get(r.name, budget), budget)) for r in runs},
            [r.name for r in runs if r.name not in stopped],
        ),
        verdicts=tuple(verdicts),
    )


def evaluation_times(runs: Sequence[RunCurve], budget: float) -> FloatArray:
    """Every x at which some run has an evaluation, up to the budget, in order."""
    xs = np.unique(np.concatenate([r.x[r.x <= budget] for r in runs]))
    return np.asarray(xs, dtype=np.float64)


def replay(name: str, runs: Sequence[RunCurve], factory: PolicyFactory, budget: float | None = None) -> ReplayResult:
    """All runs side by side: at each evaluation time the policy sees every run's points so far.

    Time is compute per run: runs start together and a live run reaches x at time x. A run resumed at time t
    after being stopped at x_s goes on from x_s (its evaluations come ``t - x_s`` later than they would have), so
    its compute is still the x it reaches, and the replay lasts until every live run reaches the budget."""
    until = default_budget(runs) if budget is None else float(budget)
    _check_budget(runs, until)
    policy = factory(runs, until)
    by_name = {r.name: r for r in runs}
    ends = {r.name: int(np.searchsorted(r.x, until, side="right")) for r in runs}
    seen_n = dict.fromkeys(by_name, 0)  # points of each run seen so far
    lag = dict.fromkeys(by_name, 0.0)  # how much later than at the start each run's evaluations come
    stopped: dict[str, float] = {}
    reasons: dict[str, str] = {}
    resumed: dict[str, list[float]] = {}
    t_end = dict.fromkeys(by_name, until)
    verdicts: list[VerdictStep] = []
    while True:
        pending = [n for n in by_name if n not in stopped and seen_n[n] < ends[n]]
        if not pending:
            break
        t = min(float(by_name[n].x[seen_n[n]]) + lag[n] for n in pending)
        for n in pending:
            if float(by_name[n].x[seen_n[n]]) + lag[n] <= t * (1 + 1e-12) + 1e-300:
                seen_n[n] += 1
        live = frozenset(n for n in by_name if n not in stopped)
        seen = {n: by_name[n].first(seen_n[n]) for n in by_name}
        answer = policy(GridView(t, until, seen, live, dict(stopped)))
        moves = answer if isinstance(answer, Moves) else Moves(stop=answer)
        if moves.verdict is not None:
            verdicts.append(moves.verdict)
        for run, reason in moves.stop.items():
            if run in live:
                stopped[run] = min(t - lag[run], until)
                reasons[run] = reason
                t_end[run] = t
        for run, reason in moves.resume.items():
            if run in stopped:
                at = stopped.pop(run)
                resumed.setdefault(run, []).append(at)
                lag[run] = t - at
                reasons[run] = reason
                t_end[run] = lag[run] + until
    elapsed = max(t_end.values()) / until if until > 0 else 1.0
    return outcome(name, runs, until, stopped, reasons, resumed, elapsed, verdicts)


#: A sequential trial: given the trials already finished (their curves up to where they ended) and this run, the x
#: at which this trial is stopped (None: it completes) and the reason.
SequentialPolicy = Callable[[RunCurve], tuple[float | None, str | None]]
SequentialFactory = Callable[[Sequence[RunCurve], float], SequentialPolicy]


def replay_sequential(
    name: str,
    runs: Sequence[RunCurve],
    factory: SequentialFactory,
    budget: float | None = None,
    orders: int = 20,
    seed: int = 0,
) -> ReplayResult:
    """Trials one after another in ``orders`` random orders (the first is the files' order); compute and regret
    are averaged over the orders and the worst of each is kept; the per-run numbers are from the first order."""
    until = default_budget(runs) if budget is None else float(budget)
    _check_budget(runs, until)
    rng = np.random.default_rng(seed)
    results: list[ReplayResult] = []
    for k in range(max(1, orders)):
        order = list(range(len(runs))) if k == 0 else [int(i) for i in rng.permutation(len(runs))]
        policy = factory(runs, until)
        stopped: dict[str, float] = {}
        reasons: dict[str, str] = {}
        for i in order:
            at, why = policy(runs[i].upto(until))
            if at is not None:
                stopped[runs[i].name] = at
                reasons[runs[i].name] = why or ""
        results.append(outcome(name, runs, until, stopped, reasons))
    return aggregate(name, results)


def aggregate(name: str, results: Sequence[ReplayResult]) -> ReplayResult:
    """Replays of one policy under different random orders as one result: mean compute and regret, the worst of
    each, and the per-run numbers of the first replay."""
    first = results[0]
    return ReplayResult(
        policy=name,
        budget=first.budget,
        compute=float(np.mean([r.compute for r in results])),
        pick=first.pick,
        regret=float(np.mean([r.regret for r in results])),
        best=first.best,
        runs=first.runs,
        orders=len(results),
        regret_worst=float(max(r.regret for r in results)),
        compute_worst=float(max(r.compute for r in results)),
        recipe_regret=_mean_known([r.recipe_regret for r in results]),
    )


def _mean_known(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are known; ``None`` when none is."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def never_stop(runs: Sequence[RunCurve], budget: float) -> StopPolicy:
    """The ``none`` policy: every run goes to the budget."""
    del runs, budget
    return lambda view: {}


def cached_fitter(
    options: FitOptions | None = None, *, grid: bool = True, memo: dict[bytes, list[CurveFit]] | None = None
) -> GridFitter:
    """The service's fits, memoised on the points (a replay refits the same prefixes often): the runs fitted as one
    grid (:func:`fit_grid`, as the service fits an experiment's runs), or each on its own (``grid=False``). ``memo``
    (filled in place) lets a caller keep the fits, e.g. on disk between runs."""
    opts = options or FitOptions()
    memo = {} if memo is None else memo

    def key(curves: Sequence[tuple[FloatArray, FloatArray]]) -> bytes:
        parts = [
            np.asarray(x, dtype=np.float64).tobytes() + b"|" + np.asarray(y, dtype=np.float64).tobytes()
            for x, y in curves
        ]
        return b"#".join(parts)

    def fit(curves: Sequence[tuple[FloatArray, FloatArray]]) -> list[CurveFit]:
        if grid:
            k = key(curves)
            if k not in memo:
                memo[k] = fit_grid(curves, opts)
            return memo[k]
        out = []
        for c in curves:
            k = key([c])
            if k not in memo:
                memo[k] = [fit_curve(c[0], c[1], opts)]
            out.append(memo[k][0])
        return out

    return fit


def replicate_key(name: str) -> str | None:
    """The recipe part of a run name that ends in a seed (``lr1e-4_s0`` -> ``lr1e-4``); ``None`` without one."""
    m = SEED_SUFFIX.search(name)
    return name[: m.start()] if m is not None and m.start() > 0 else None


def service_waiting(grid: Sequence[GridRun], ranked: Collection[int], auto_stop: bool) -> tuple[int, ...]:
    """The runs the service's verdict waits for (``server.assess.verdict.could_still_win``), by index: those
    without a value at the budget (not ``ranked``) that are live, or, under ``auto_stop`` while any run is live,
    stopped by a rule the policy may undo (:data:`~rl_core.scaling.decide.resume.RESUMABLE_RULES`)."""
    any_live = any(r.status == "live" for r in grid)

    def could_still_win(r: GridRun) -> bool:
        resumable = auto_stop and any_live and r.status == "stopped" and r.stop_rule in RESUMABLE_RULES
        return r.status == "live" or resumable

    return tuple(i for i, r in enumerate(grid) if i not in ranked and could_still_win(r))


def scalerl_policy(
    policy: Policy | None = None, fitter: GridFitter | None = None, *, replicates: bool = True, enact: bool = True
) -> PolicyFactory:
    """scalerl's decisions (:func:`~rl_core.scaling.decide.grid_decisions.decide_grid`, exactly what the service runs
    for ``auto_stop``) as a replay policy: every run is a :class:`GridRun` with the common budget, and the runs are
    fitted as one grid (:func:`cached_fitter`), as the service fits an experiment's runs. Runs whose names agree up
    to a seed suffix (:func:`replicate_key`) are replicates of one recipe, as the service knows from the runs'
    recipes; ``replicates=False`` ranks them against each other (``Policy.rank_replicates``). Every answer carries
    the verdict the service would show (:class:`VerdictStep`); ``enact=False`` replays the default ``recommend`` mode:
    the advice is recorded, but no run is stopped or resumed."""
    pol = policy if replicates else replace(policy or Policy(), rank_replicates=True)

    def factory(runs: Sequence[RunCurve], budget: float) -> StopPolicy:
        fit = fitter or cached_fitter()
        configs = {r.name: replicate_key(r.name) for r in runs}
        ends = {r.name: r.upto(budget).x.size for r in runs}  # a run with all its points up to the budget is done
        stop_rules: dict[str, str] = {}  # the rule that stopped each run, as the service stores it
        resumes: dict[str, int] = {}  # how many times the policy resumed each run

        def decide(view: GridView) -> Moves:
            names = [r.name for r in runs]
            grid = [
                GridRun(
                    n,
                    view.runs[n].x,
                    view.runs[n].y,
                    ("completed" if view.runs[n].x.size >= ends[n] else "live") if n in view.live else "stopped",
                    budget,
                    n,
                    view.runs[n].metrics,
                    configs[n],
                    None if n in view.live else stop_rules.get(n),
                    resumes.get(n, 0),
                )
                for n in names
            ]
            assessed = assess_grid(grid, pol, fit)
            recs, v = assessed.recommendations, assessed.verdict
            stop = {r.run_id: r.reason for r in recs if r.action == "stop" and r.run_id in view.live}
            resume = {r.run_id: r.reason for r in recs if r.action == "resume" and r.run_id in view.stopped}
            step = VerdictStep(
                view.x_now,
                None if v.best is None else names[v.best],
                v.decided(waiting=service_waiting(grid, v.order, enact)),
                v.confidence,
                v.basis,
                tuple(stop),
                tuple(r.run_id for r in recs if r.action == "scale" and r.run_id in view.live),
            )
            if not enact:
                return Moves(verdict=step)
            stop_rules.update({r.run_id: r.rule for r in recs if r.run_id in stop})
            for n in resume:
                resumes[n] = resumes.get(n, 0) + 1
            return Moves(stop, resume, step)

        return decide

    return factory
