"""scalerl's Optuna pruner replayed through Optuna on the recorded grids, beside Optuna's own pruners and
``scalerl replay``'s scalerl row: the table behind docs/integrations.md ("Optuna: the scalerl pruner").

    python bench/optuna_pruner.py [--public-only] [--orders 20] [--sequential-max-runs 8] [--json FILE]

Grids: bench/replay.py's (shared/curves families, the engine's grids, the public studies). Per grid, the same
replay accounting (:mod:`rl_core.scaling.measure.replay`): ``scalerl`` (``decide_grid`` as ``scalerl replay``
replays it, with resumes), ``scalerl-optuna-pruner-parallel`` (the pruner side by side through Optuna: no resumes,
an Optuna trial cannot come back), ``...-sequential`` (trials one by one, files' order only; on grids of at most
``--sequential-max-runs`` runs, as it refits the study at every report), and Optuna's median, ASHA and Hyperband
(``rl_core.scaling.measure.replay_optuna``, averaged over ``--orders`` orders), all with flat priors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import REPO, engine_grids, public_grids, shared_grids  # bench/replay.py

from rl_core.scaling.measure.replay import ReplayResult, load_grid, replay, scalerl_policy
from rl_core.scaling.measure.replay_optuna import PRUNERS, replay_pruner
from scalerl.integrations.optuna_replay import replay_scalerl_pruner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curves", type=Path, default=REPO.parent / "shared" / "curves")
    ap.add_argument("--engine", type=Path, default=REPO / "tests" / "fixtures" / "engine_grids")
    ap.add_argument("--public", type=Path, default=REPO / "tests" / "fixtures" / "public_grids")
    ap.add_argument("--public-only", action="store_true")
    ap.add_argument("--orders", type=int, default=20)
    ap.add_argument("--sequential-max-runs", type=int, default=8)
    ap.add_argument("--grid", action="append", help="Only these grids (repeatable).")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    public = public_grids(args.public)
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
