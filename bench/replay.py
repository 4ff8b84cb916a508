"""Replay every recorded grid under every stop policy: the table behind docs/decisions.md and docs/benchmarks.md.

    python bench/replay.py [--curves ../shared/curves] [--engine tests/fixtures/engine_grids]
                           [--public tests/fixtures/public_grids] [--orders 20]
                           [--markdown] [--json FILE]

Grids: families of ``shared/curves`` that share a base model and an evaluation schedule, the engine's own
recorded grids (one folder per grid), and the ablations of a public GRPO study (``--public``, as its
``ablations.json`` groups them). Policies: scalerl's ``decide_grid`` (what the service runs for ``auto_stop``;
also ``scalerl-no-replicates``, blind to which runs are seeds of one recipe), ``none``, and Optuna's median, ASHA
and Hyperband pruners, side by side and one trial after another (averaged over ``--orders`` random orders).
``tuned`` marks the grids the policy's defaults were chosen on; the others are held out.

scalerl's forecasts use a shape prior that never learned from the replayed grid's source (``--prior loso``, the
default): the shipped prior is learned from the public curves, so replaying their grids with it (``--prior
shipped``) scores the forecaster on curves it learned from. The leave-one-source-out prior is learned as the
shipped one is (``bench/build_shape_prior.py``, from ``--curves``) minus the grid's sources; its extrapolation
error is left out, as the decisions never use it. The engine grids are a source the shipped prior never saw.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.replay_frontier (--frontier)

from rl_core.scaling.decide.grid_decisions import GridFitter
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.fit.prior import ShapePrior
from rl_core.scaling.measure.corpus import load_curves, source_of
from rl_core.scaling.measure.prior_build import PriorCorpus
from rl_core.scaling.measure.replay import (
    ReplayResult,
    RunCurve,
    cached_fitter,
    load_grid,
    never_stop,
    replay,
    scalerl_policy,
)
from rl_core.scaling.measure.replay_optuna import PRUNERS, replay_pruner
from rl_core.scaling.measure.verdict_score import VerdictScore, score_verdicts

REPO = Path(__file__).resolve().parents[1]


def add_corpus_args(ap: argparse.ArgumentParser) -> None:
    """``--curves``, ``--engine``, ``--public``: the three collections of real curves the benchmarks read, by
    default the sibling ``shared/curves`` and this checkout's engine and public grid fixtures."""
    ap.add_argument("--curves", type=Path, default=REPO.parent / "shared" / "curves")
    ap.add_argument("--engine", type=Path, default=REPO / "tests" / "fixtures" / "engine_grids")
    ap.add_argument("--public", type=Path, default=REPO / "tests" / "fixtures" / "public_grids")


#: Grids the decision thresholds were tuned on (docs/decisions.md); every other grid is held out.
TUNED = ("verl-async", "engine-lr")


@dataclass(frozen=True)
class GridSpec:
    name: str
    files: tuple[Path, ...]
    x: str
    y: str | None = None
    note: str = ""


def shared_grids(curves: Path) -> list[GridSpec]:
    """The families of shared/curves that form a grid: one base model (or a size sweep) and one eval schedule."""
    val = sorted(p for p in curves.glob("verl_asyncreward_*.csv") if "trainreward" not in p.name)
    train = sorted(curves.glob("verl_asyncreward_*_trainreward.csv"))
    out = [
        GridSpec("qwen3-sizes", tuple(sorted(curves.glob("qwen3_*_josancamon.csv"))), "step", note="5 sizes, GRPO"),
        GridSpec("verl-async", tuple(val), "step", note="11 near-replicates, 2 base models"),
        GridSpec("verl-async-7b", tuple(p for p in val if "3b" not in p.name), "step", note="7 replicates"),
        GridSpec("verl-async-3b", tuple(p for p in val if "3b" in p.name), "step", note="4 replicates"),
        GridSpec("verl-async-train", tuple(train), "step", note="train reward, 11 runs"),
        GridSpec(
            "deepseek-grpo-ppo",
            tuple(sorted(curves.glob("verl_deepseek7b_chat_gsm8k_*_1120steps.csv"))),
            "step",
            note="GRPO vs PPO",
        ),
        GridSpec(
            "qwen2.5-0.5b-resp",
            tuple(sorted(p for p in curves.glob("verl_qwen2p5_0p5b_gsm8k_ppo_resp*.csv") if "train" not in p.name)),
            "step",
            note="response length 256 vs 512",
        ),
    ]
    return [g for g in out if len(g.files) >= 2]


def last_x(path: Path, column: str) -> float:
    """The last value of ``column`` in a CSV (its runs are in step order)."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return float(rows[-1][column])


def public_grids(root: Path) -> list[GridSpec]:
    """The ablations of public studies committed as fixtures (``<study>/ablations.json`` lists each ablation's runs,
    ``<study>/<folder>/<run>.csv`` with x = step, y = pass rate; ``bench/make_public_grids.py``), plus
    ``<study>-all``: every distinct run of the study that reaches its longest budget (one project's runs at one
    budget, as a researcher's dashboard holds them). ``<study>/study.json`` names the x and y columns where they
    are not ``step`` and ``pass_rate``, and says ``"all": false`` where the study's runs do not share a base model
    (no ``-all`` grid then). Added after every threshold was set: all held out."""
    if not root.is_dir():
        return []
    out = []
    for manifest in sorted(root.glob("*/ablations.json")):
        study = manifest.parent
        axes = json.loads((study / "study.json").read_text()) if (study / "study.json").is_file() else {}
        x, y = axes.get("x", "step"), axes.get("y", "pass_rate")
        for grid, members in json.loads(manifest.read_text()).items():
            if len(members) >= 2:
                out.append(GridSpec(f"{study.name}-{grid}", tuple(study / m for m in members), x, y))
        last = {f: last_x(f, x) for f in sorted(study.glob("*/*.csv"))}
        budget = max(last.values())
        longest = tuple(f for f, v in last.items() if v == budget)
        if len(longest) >= 3 and axes.get("all", True):
            out.append(GridSpec(f"{study.name}-all", longest, x, y, "every run at the longest budget"))
    return out


def engine_grids(root: Path) -> list[GridSpec]:
    """One grid per folder of recorded engine runs (x = training FLOPs: device-hours moved with the shared machine's
    load while they were recorded, FLOPs did not; y = validation pass rate)."""
    if not root.is_dir():
        return []
    return [
        GridSpec(f"engine-{d.name}", tuple(sorted(d.glob("*.csv"))), "train_flops", "pass_rate", "CPU engine")
        for d in sorted(root.iterdir())
        if d.is_dir() and len(list(d.glob("*.csv"))) >= 2
    ]


class LeaveOneSourceOut:
    """Shape priors learned as the shipped one is, from the curves under ``roots``, minus a grid's sources."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [r.resolve() for r in roots if r.is_dir()]
        self.corpus = PriorCorpus([c for root in self.roots for c in load_curves(root)[0]])

    def sources_of(self, files: tuple[Path, ...]) -> set[str]:
        """The sources of a grid's files that the prior's corpus holds, named as :func:`source_of` names them;
        files outside the corpus (the engine grids) have none to leave out."""
        out = set()
        for f in files:
            path = f.resolve()
            root = next((r for r in self.roots if path.is_relative_to(r)), None)
            if root is not None:
                out.add(source_of(path.relative_to(root).with_suffix("").as_posix()))
        return out

    def prior_without(self, sources: set[str]) -> ShapePrior:
        # no extrapolation error: the decisions compare curve draws, which do not use it
        return self.corpus.prior(version="replay-loso", exclude=sources, extrapolation=False)


def policies_for(
    runs: list[RunCurve],
    orders: int,
    fitter: GridFitter | None = None,
    pruners: bool = True,
    only: frozenset[str] | None = None,
) -> list[ReplayResult]:
    """Every policy side by side on one grid (``only``: just the policies with these names)."""
    variants: list[tuple[str, Policy | None, bool]] = [
        ("scalerl", None, True),
        # the default ``recommend`` mode: nothing is stopped; the verdict and the advice users read are scored
        ("scalerl-advice", None, True),
        # the same decisions comparing the blended centre with the posterior's own spread, and the raw posterior
        ("scalerl-blended", Policy(forecast_comparison="blended"), True),
        ("scalerl-raw-posterior", Policy(forecast_comparison="raw"), True),
        # the same decisions blind to which runs are seeds of one recipe (Optuna's pruners are blind to it too)
        ("scalerl-no-replicates", None, False),
    ]
    scalerl: list[tuple[str, Callable[[], ReplayResult]]] = [
        (
            name,
            lambda n=name, p=pol, r=reps: replay(  # type: ignore[misc]
                n, runs, scalerl_policy(p, fitter=fitter, replicates=r, enact=n != "scalerl-advice")
            ),
        )
        for name, pol, reps in variants
    ]
    scalerl.append(("none", lambda: replay("none", runs, never_stop)))
    results = [make() for name, make in scalerl if only is None or name in only]
    for kind in PRUNERS if pruners else ():
        for mode in ("parallel", "sequential"):
            if only is None or f"optuna-{kind}-{mode}" in only:
                results.append(replay_pruner(kind, runs, None, mode=mode, orders=orders))
    return results


def summary(table: dict[str, list[ReplayResult]]) -> list[tuple[str, float, float, float, float, float | None]]:
    """Per policy: mean compute, mean regret, worst regret, worst compute over the grids, and the mean regret by
    recipe over the grids with seeds (``None`` without such a grid)."""
    by_policy: dict[str, list[ReplayResult]] = {}
    for results in table.values():
        for r in results:
            by_policy.setdefault(r.policy, []).append(r)
    return [
        (
            name,
            float(np.mean([r.compute for r in rs])),
            float(np.mean([r.regret for r in rs])),
            float(max(r.regret_worst if r.regret_worst is not None else r.regret for r in rs)),
            float(max(r.compute for r in rs)),
            _mean_or_none([r.recipe_regret for r in rs if r.recipe_regret is not None]),
        )
        for name, rs in by_policy.items()
    ]


def _mean_or_none(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def verdict_rows(grids: dict[str, list[RunCurve]], table: dict[str, list[ReplayResult]]) -> list[str]:
    """The verdict users read, scored per grid and policy (:mod:`rl_core.scaling.measure.verdict_score`)."""
    out = [
        "| grid | policy | tolerance | decided at | decided at end (basis) | finals separated | named-best regret "
        "(first decision / end) | wrong once decided | near-best runs told to stop | leader told to stop |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, results in table.items():
        for r in results:
            v = score_verdicts(r, grids[name])
            if v is None:
                continue
            first = "—" if v.named_regret_first is None else f"{v.named_regret_first:.4f}"
            end = "—" if v.named_regret_end is None else f"{v.named_regret_end:.4f}"
            wrong = "—" if v.wrong_once_decided is None else f"{v.wrong_once_decided:.0%}"
            at = "never" if v.decided_at is None else f"{v.decided_at:.2f}"
            out.append(
                f"| {name} | {r.policy} | {v.tolerance:.4f} | {at} | {'yes' if v.decided_at_end else 'no'} "
                f"({v.end_basis}) | {'yes' if v.separated else 'no'} | {first} / {end} | {wrong} | "
                f"{v.near_best_stopped} | {v.leader_stops} |"
            )
    return out


def verdict_summary(grids: dict[str, list[RunCurve]], table: dict[str, list[ReplayResult]]) -> list[str]:
    """Per policy over the grids: how often and how early it decides, the named best's regret, wrong decisions,
    separated finished grids left undecided, and advice errors."""
    by: dict[str, list[VerdictScore]] = {}
    for name, results in table.items():
        for r in results:
            v = score_verdicts(r, grids[name])
            if v is not None:
                by.setdefault(r.policy, []).append(v)
    out = [
        "| policy | grids | decided (ever / at end) | median decided at | named-best regret at first decision "
        "(mean / worst) | wrong once decided (mean) | separated grids left undecided | grids with a near-best "
        "run told to stop | leader told to stop |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for policy, vs in by.items():
        ever = [v for v in vs if v.decided_at is not None]
        firsts = [v.named_regret_first for v in ever if v.named_regret_first is not None]
        wrongs = [v.wrong_once_decided for v in ever if v.wrong_once_decided is not None]
        med = f"{float(np.median([v.decided_at for v in ever if v.decided_at is not None])):.2f}" if ever else "—"
        out.append(
            f"| {policy} | {len(vs)} | {len(ever)} / {sum(v.decided_at_end for v in vs)} | {med} | "
            f"{_fmt(_mean_or_none(firsts))} / {_fmt(max(firsts) if firsts else None)} | "
            f"{'—' if not wrongs else f'{float(np.mean(wrongs)):.1%}'} | "
            f"{sum(1 for v in vs if v.separated and not v.decided_at_end)} of {sum(v.separated for v in vs)} | "
            f"{sum(1 for v in vs if v.near_best_stopped)} | {sum(v.leader_stops for v in vs)} |"
        )
    return out


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--orders", type=int, default=20)
    ap.add_argument("--no-pruners", action="store_true", help="Only scalerl's policies and never stopping (faster).")
    ap.add_argument("--policy", action="append", help="Only these policies (repeatable; names as printed).")
    ap.add_argument("--grid", action="append", help="Only these grids (repeatable).")
    ap.add_argument("--json", type=Path, help="Write every result as JSON here.")
    ap.add_argument(
        "--prior",
        choices=("flat", "loso", "shipped"),
        default="flat",
        help="scalerl's shape prior: flat (default: what the service uses on a stack with fewer than 8 finished "
        "runs), learned without the grid's sources, or the shipped one.",
    )
    ap.add_argument(
        "--prior-corpus",
        type=Path,
        nargs="+",
        help="Directories the leave-one-source-out prior learns from (default: --curves, as the shipped prior); "
        "e.g. the engine grids, to replay each engine grid with a prior learned from the other two.",
    )
    ap.add_argument(
        "--frontier",
        action="store_true",
        help="scalerl's compute-regret frontier (Policy.compute_target) beside each Optuna pruner's, over all grids "
        "and per collection (bench/replay_frontier.py; --orders, --grid, --json pass on).",
    )
    ap.add_argument("--plot", type=Path, help="With --frontier: the frontier as a Plotly HTML here.")
    args = ap.parse_args()
    if args.frontier:
        from bench.replay_frontier import main as frontier

        argv = ["--curves", str(args.curves), "--engine", str(args.engine), "--public", str(args.public)]
        argv += ["--orders", str(args.orders), *(a for g in args.grid or () for a in ("--grid", g))]
        argv += [*(("--json", str(args.json)) if args.json else ()), *(("--plot", str(args.plot)) if args.plot else ())]
        frontier(argv)
        return
    public_specs = public_grids(args.public)
    grids = shared_grids(args.curves) + engine_grids(args.engine) + public_specs
    if args.grid:
        grids = [g for g in grids if g.name in args.grid]
    loso = LeaveOneSourceOut(args.prior_corpus or [args.curves]) if args.prior == "loso" else None
    table: dict[str, list[ReplayResult]] = {}
    curves: dict[str, list[RunCurve]] = {}
    prior_notes: list[str] = []
    started = time.perf_counter()
    print("| grid | runs | held out | policy | compute | regret | worst regret (orders) | recipe regret | pick |")
    print("|---|---|---|---|---|---|---|---|---|")
    for g in grids:
        runs = load_grid(list(g.files), g.x, g.y)
        curves[g.name] = runs
        fitter = cached_fitter(FitOptions(prior="public")) if args.prior == "shipped" else None  # None: flat
        if loso is not None:
            without = loso.sources_of(g.files)
            fitter = cached_fitter(FitOptions(prior=loso.prior_without(without)))
            left_out = ", ".join(sorted(without)) or "nothing (a source the prior's corpus does not hold)"
            prior_notes.append(f"{g.name}: scalerl's shape prior learned leaving out {left_out}")
        only = frozenset(args.policy) if args.policy else None
        results = policies_for(runs, args.orders, fitter, pruners=not args.no_pruners, only=only)
        table[g.name] = results
        for r in results:
            worst = "" if r.regret_worst is None else f"{r.regret_worst:.4f} ({r.orders})"
            held = "tuned" if g.name in TUNED else "yes"
            by_recipe = "" if r.recipe_regret is None else f"{r.recipe_regret:.4f}"
            print(
                f"| {g.name} | {len(runs)} | {held} | {r.policy} | {r.compute:.3f} | {r.regret:.4f} | {worst} | "
                f"{by_recipe} | {r.pick} |"
            )
    print()
    public = {g.name for g in public_specs}
    studies = sorted({str(g.files[0].resolve().relative_to(args.public.resolve()).parts[0]) for g in public_specs})
    groups = [
        ("all {n} grids", list(table)),
        ("the {n} held-out grids", [n for n in table if n not in TUNED]),
        ("the {n} grids before the public studies", [n for n in table if n not in public]),
    ]
    groups += [
        (
            f"the {{n}} grids of the public study {study} (added after the rules were set)",
            [n for n in table if n in public and n.startswith(f"{study}-")],
        )
        for study in studies
    ]
    for label, names in groups:
        sub = {n: table[n] for n in names}
        if not sub:
            continue
        print(f"Summary over {label.format(n=len(sub))}:\n")
        print(
            "| policy | mean compute | mean regret | worst regret | worst compute | recipe regret (grids with seeds) |"
        )
        print("|---|---|---|---|---|---|")
        for name, c, regret, w, wc, rr in summary(sub):
            print(f"| {name} | {c:.3f} | {regret:.4f} | {w:.4f} | {wc:.3f} | {'' if rr is None else f'{rr:.4f}'} |")
        print()
    print("The verdict users read, per grid (scalerl's policies):\n")
    print("\n".join(verdict_rows(curves, table)))
    print()
    for label, names in groups:
        sub = {n: table[n] for n in names}
        if sub:
            print(f"The verdict over {label.format(n=len(sub))}:\n")
            print("\n".join(verdict_summary(curves, sub)))
            print()
    for note in prior_notes:
        print(f"- {note}")
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({g: [r.to_dict() for r in rs] for g, rs in table.items()}, indent=1))


if __name__ == "__main__":
    main()
