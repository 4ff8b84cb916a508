"""scalerl's Optuna pruner replayed through Optuna on the recorded grids, beside Optuna's own pruners and
``scalerl replay``'s scalerl row: the table behind docs/integrations.md ("Optuna: the scalerl pruner").

    python bench/optuna_pruner.py [--public-only] [--orders 20] [--sequential-max-runs 8] [--json FILE]

Grids: bench/replay.py's (shared/curves families, the engine's grids, the public studies). Per grid, the same
replay accounting (:mod:`rl_core.scaling.measure.replay`): ``scalerl`` (``decide_grid`` as ``scalerl replay``
replays it, with resumes), ``scalerl-optuna-pruner-parallel`` (the pruner side by side through Optuna: no resumes,
an Optuna trial cannot come back), ``...-sequential`` (trials one by one, files' order only; on grids of at most
``--sequential-max-runs`` runs, a limit from when it refitted the whole study at every report), and Optuna's
median, ASHA and Hyperband (``rl_core.scaling.measure.replay_optuna``, averaged over ``--orders`` orders), all with
flat priors.

    python bench/optuna_pruner.py --studies [--quick] [--seeds 6] [--scratch-seeds 6] [--orders 2]
                                  [--storage memory|sqlite] [--json FILE]

``--studies``: recorded learning curves run as Optuna studies, trial after trial (as most Optuna users run one), under
``ScalerlPruner`` (incremental fits; also with ``interval`` 2 and 4, with ``store_decisions=False``, and refitting
the whole study at every report as it did before, ``fitter=fit_grid``, on ``--scratch-seeds`` studies), Optuna's
``MedianPruner``,
``SuccessiveHalvingPruner`` (ASHA), ``HyperbandPruner`` (configured as :mod:`rl_core.scaling.measure.replay_optuna`)
and no pruning. Each run is a trial: ``trial.report(pass_rate, step)`` at each evaluation up to the budget (``step``
the rank of its x among the grid's evaluation times; the pruner maps it back with ``compute=``), then
``should_prune()``, except after its last one (the trial has finished). Studies: ``--seeds`` studies of 30 trials
drawn from the 56 runs of the CS336 OLMo GSM8K study (the runs and their order random per seed), and (not with
``--quick``) every grid of bench/replay.py in ``--orders`` orders (the files' order first). Per pruner: compute used
(a fraction of every trial run to the budget), regret (the best final value of the unpruned study minus the chosen
trial's: the replay's accounting, :func:`rl_core.scaling.measure.replay.outcome`), how many studies lost their best
trial to a prune, the study's wall time (first ask to last tell) and the cost of each ``should_prune()`` call. The
pruners of one study run one after the other in one process, so the timing ratios are measured side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import add_corpus_args, engine_grids, public_grids, shared_grids  # bench/replay.py

from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.measure.replay import (
    ReplayResult,
    RunCurve,
    default_budget,
    evaluation_times,
    load_grid,
    outcome,
    replay,
    replicate_key,
    scalerl_policy,
)
from rl_core.scaling.measure.replay_optuna import PRUNERS, make_pruner, replay_pruner
from scalerl.integrations.optuna_pruner import ScalerlPruner
from scalerl.integrations.optuna_replay import replay_scalerl_pruner

#: The 30-trial studies are drawn from this grid of bench/replay.py (56 runs: 14 recipes x 4 seeds, 21 evaluations).
STUDY_GRID = "cs336_olmo_gsm8k-all"
STUDY_TRIALS = 30


@dataclass
class StudyRun:
    """One pruner on one study."""

    pruner: str
    study: str
    compute: float
    regret: float
    pruned_best: bool
    wall: float
    calls: list[float] = field(default_factory=list)
    fit_seconds: float | None = None
    decide_seconds: float | None = None
    fits: int | None = None
    decisions: int | None = None


PrunerMaker = Callable[[float, Callable[[int], float], int, int, str], Any]


def _scalerl(**kw: Any) -> PrunerMaker:
    return lambda budget, compute, n, warmup, name: ScalerlPruner(budget, compute=compute, **kw)


def _optuna_kind(kind: str) -> PrunerMaker:
    return lambda budget, compute, n, warmup, name: make_pruner(kind, n, warmup)


def _no_pruning(budget: float, compute: Callable[[int], float], n: int, warmup: int, name: str) -> Any:
    import optuna

    return optuna.pruners.NopPruner()


#: The pruners of ``--studies``, in the order they run on each study ("scalerl from scratch" only on the first
#: ``--scratch-seeds`` studies: it refits the whole study at every report).
STUDY_PRUNERS: dict[str, PrunerMaker] = {
    "scalerl": _scalerl(),
    "scalerl interval 2": _scalerl(interval=2),
    "scalerl interval 4": _scalerl(interval=4),
    "scalerl, pruning decisions stored only": _scalerl(store_decisions=False),
    "scalerl from scratch": _scalerl(fitter=fit_grid),
    "optuna median": _optuna_kind("median"),
    "optuna asha": _optuna_kind("asha"),
    "optuna hyperband": _optuna_kind("hyperband"),
    "no pruning": _no_pruning,
}


def run_study(
    label: str, study_name: str, runs: Sequence[RunCurve], make: PrunerMaker, storage: str | None = None
) -> StudyRun:
    """``runs`` (in this order) as trials of one study under the pruner ``make`` builds, in ``storage`` (an Optuna
    storage URL; default: in memory)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    budget = default_budget(runs)
    times = evaluation_times(runs, budget)
    warmup = int(np.searchsorted(times, 0.1 * budget, side="right"))  # as replay_optuna's median rule

    def step_of(x: float) -> int:
        return int(np.searchsorted(times, x, side="left")) + 1

    def compute(step: int) -> float:
        return float(times[step - 1])

    pruner = make(budget, compute, int(times.size), warmup, study_name)
    # Named: Hyperband assigns a trial's bracket by a hash of the study name and the trial number.
    study = optuna.create_study(study_name=f"bench-{study_name}", direction="maximize", pruner=pruner, storage=storage)
    calls: list[float] = []
    stopped: dict[str, float] = {}
    started = time.perf_counter()
    for run in runs:
        trial = study.ask()
        key = replicate_key(run.name)
        if key is not None:
            trial.set_user_attr("scalerl_recipe", key)
        mine = run.upto(budget)
        pruned = False
        for i, (x, y) in enumerate(zip(mine.x, mine.y, strict=True)):
            trial.report(float(y), step_of(float(x)))
            if i + 1 == mine.x.size:
                break  # its last evaluation: the trial has finished
            t = time.perf_counter()
            pruned = trial.should_prune()
            calls.append(time.perf_counter() - t)
            if pruned:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                stopped[run.name] = float(x)
                break
        if not pruned:
            study.tell(trial, float(mine.y[-1]))
    wall = time.perf_counter() - started
    result = outcome(label, runs, budget, stopped, {})
    out = StudyRun(label, study_name, result.compute, result.regret, result.best in stopped, wall, calls)
    if isinstance(pruner, ScalerlPruner):
        out.fit_seconds, out.decide_seconds = pruner.fit_seconds, pruner.decide_seconds
        out.fits, out.decisions = pruner.fits, pruner.decisions
    return out


def _studies(args: argparse.Namespace) -> list[tuple[str, list[RunCurve], bool]]:
    """(name, trials in order, with the from-scratch row): the 30-trial studies, then the grids' orders."""
    public = public_grids(args.public)
    specs = {g.name: g for g in public}
    whole = load_grid(list(specs[STUDY_GRID].files), specs[STUDY_GRID].x, specs[STUDY_GRID].y)
    out = []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        picked = [whole[int(i)] for i in rng.choice(len(whole), size=STUDY_TRIALS, replace=False)]
        out.append((f"{STUDY_GRID}-{STUDY_TRIALS}-seed{seed}", picked, seed < args.scratch_seeds))
    if args.quick:
        return out
    grids = shared_grids(args.curves) + engine_grids(args.engine) + public
    for g in grids:
        if args.grid and g.name not in args.grid:
            continue
        runs = load_grid(list(g.files), g.x, g.y)
        rng = np.random.default_rng(0)
        for k in range(args.orders):
            order = list(range(len(runs))) if k == 0 else [int(i) for i in rng.permutation(len(runs))]
            out.append((f"{g.name}-order{k}", [runs[i] for i in order], False))
    return out


def studies_main(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    results: list[StudyRun] = []
    print("| study | trials | pruner | compute | regret | best pruned | wall s | should_prune median / p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, runs, scratch in _studies(args):
        for label, make in STUDY_PRUNERS.items():
            if label == "scalerl from scratch" and not scratch:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                storage = f"sqlite:///{tmp}/study.db" if args.storage == "sqlite" else None
                r = run_study(label, name, runs, make, storage)
            results.append(r)
            med, p95 = _ms(r.calls)
            print(
                f"| {name} | {len(runs)} | {label} | {r.compute:.3f} | {r.regret:.4f} | "
                f"{'yes' if r.pruned_best else ''} | {r.wall:.2f} | {med} / {p95} |",
                flush=True,
            )
    print()
    thirty = [r for r in results if r.study.startswith(f"{STUDY_GRID}-{STUDY_TRIALS}-")]
    _summary(f"the {STUDY_TRIALS}-trial studies", thirty)
    _summary("the studies with a from-scratch row", [r for r in thirty if _has_scratch(thirty, r.study)])
    others = [r for r in results if r not in thirty]
    if others:
        _summary("the recorded grids' studies", others)
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))


def _has_scratch(results: Sequence[StudyRun], study: str) -> bool:
    return any(r.study == study and r.pruner == "scalerl from scratch" for r in results)


def _ms(calls: Sequence[float]) -> tuple[str, str]:
    if not calls:
        return "–", "–"
    return f"{1000 * np.median(calls):.2f}", f"{1000 * np.percentile(calls, 95):.2f}"


def _summary(label: str, results: Sequence[StudyRun]) -> None:
    studies = sorted({r.study for r in results})
    if not studies:
        return
    median_wall = {r.study: r.wall for r in results if r.pruner == "optuna median"}
    print(f"Over {label} ({len(studies)}):\n")
    print(
        "| pruner | compute | regret (worst) | best pruned | wall s | wall / median rule's | fits s | "
        "decisions s (fits apart) | the rest s, / median rule's wall | should_prune median / p95 ms | "
        "fits / decisions |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label_p in STUDY_PRUNERS:
        rs = [r for r in results if r.pruner == label_p]
        if not rs:
            continue
        base = sum(median_wall[r.study] for r in rs)
        wall = sum(r.wall for r in rs)
        med, p95 = _ms([c for r in rs for c in r.calls])
        ours = rs[0].fit_seconds is not None
        fits = sum(r.fit_seconds or 0.0 for r in rs)
        decide = sum(r.decide_seconds or 0.0 for r in rs) - fits
        rest = wall - fits - decide
        fitted = "–" if label_p == "scalerl from scratch" else str(sum(r.fits or 0 for r in rs))  # fit_grid's own
        counted = f"{fitted} / {sum(r.decisions or 0 for r in rs)}" if ours else ""
        print(
            f"| {label_p} | {np.mean([r.compute for r in rs]):.3f} | {np.mean([r.regret for r in rs]):.4f} "
            f"({max(r.regret for r in rs):.4f}) | {sum(r.pruned_best for r in rs)} of {len(rs)} | {wall:.1f} | "
            f"{wall / base:.1f}× | {f'{fits:.1f}' if ours else ''} | {f'{decide:.1f}' if ours else ''} | "
            f"{rest:.1f}, {rest / base:.1f}× | {med} / {p95} | {counted} |"
        )
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--public-only", action="store_true")
    ap.add_argument("--orders", type=int, default=None, help="Random orders (default 20; --studies: 2).")
    ap.add_argument("--sequential-max-runs", type=int, default=8)
    ap.add_argument("--grid", action="append", help="Only these grids (repeatable).")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--studies", action="store_true", help="Studies trial after trial under each pruner (see above).")
    ap.add_argument("--quick", action="store_true", help="--studies: the 30-trial studies only.")
    ap.add_argument("--seeds", type=int, default=6, help="--studies: how many 30-trial studies.")
    ap.add_argument("--scratch-seeds", type=int, default=6, help="--studies: ... with the from-scratch row.")
    ap.add_argument(
        "--storage",
        choices=("memory", "sqlite"),
        default="memory",
        help="--studies: Optuna's in-memory storage, or an RDB one (a new SQLite file per study).",
    )
    args = ap.parse_args()
    if args.studies:
        args.orders = 2 if args.orders is None else args.orders  # each order a study of every pruner
        studies_main(args)
        return
    public = public_grids(args.public)
    args.orders = 20 if args.orders is None else args.orders
    specs = public if args.public_only else shared_grids(args.curves) + engine_grids(args.engine) + public
    if args.grid:
        specs = [g for g in specs if g.name in args.grid]
    table: dict[str, list[ReplayResult]] = {}
    started = time.perf_counter()
    print("| grid | runs | policy | compute | regret | worst regret | pick | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for g in specs:
        runs = load_grid(list(g.files), g.x, g.y)
        results: list[tuple[ReplayResult, float]] = []
        makers = [
            lambda runs=runs: replay("scalerl", runs, scalerl_policy()),
            lambda runs=runs: replay_scalerl_pruner(runs, mode="parallel"),
        ]
        if len(runs) <= args.sequential_max_runs:
            makers.append(lambda runs=runs: replay_scalerl_pruner(runs, mode="sequential", orders=1))
        for kind in PRUNERS:
            for mode in ("parallel", "sequential"):
                makers.append(
                    lambda runs=runs, k=kind, m=mode: replay_pruner(k, runs, None, mode=m, orders=args.orders)
                )
        for make in makers:
            t = time.perf_counter()
            r = make()
            results.append((r, time.perf_counter() - t))
        table[g.name] = [r for r, _ in results]
        for r, secs in results:
            worst = "" if r.regret_worst is None else f"{r.regret_worst:.4f}"
            print(
                f"| {g.name} | {len(runs)} | {r.policy} | {r.compute:.3f} | {r.regret:.4f} | {worst} | {r.pick} | "
                f"{secs:.1f} |",
                flush=True,
            )
    print()
    groups = [
        ("all {n} grids", list(table)),
        ("the {n} public-study grids", [g.name for g in public if g.name in table]),
    ]
    for label, names in groups:
        if not names:
            continue
        print(f"Summary over {label.format(n=len(names))}:\n")
        print("| policy | grids | mean compute | mean regret | worst regret | worst compute |")
        print("|---|---|---|---|---|---|")
        by: dict[str, list[ReplayResult]] = {}
        for n in names:
            for r in table[n]:
                by.setdefault(r.policy, []).append(r)
        for policy, rs in by.items():
            worst = max(r.regret_worst if r.regret_worst is not None else r.regret for r in rs)
            print(
                f"| {policy} | {len(rs)} | {np.mean([r.compute for r in rs]):.3f} | "
                f"{np.mean([r.regret for r in rs]):.4f} | {worst:.4f} | {max(r.compute for r in rs):.3f} |"
            )
        print()
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({g: [r.to_dict() for r in rs] for g, rs in table.items()}, indent=1))


if __name__ == "__main__":
    main()
