"""The least compute a stop rule can spend on the recorded grids: the oracle floor of the frontier.

    python bench/frontier_floor.py [--starts 0.037 0.111 0.333]

An oracle that knows which run ends best lets it run to the budget and stops every other run at the grid's first
evaluation after any training at or after ``start`` x the budget (it judges no earlier than a pruner with that
minimum resource): regret 0 at the least compute any rule that keeps one run to the end and judges from ``start``
on can spend. The floor is averaged over grids as the frontier's compute is (each grid's spent compute over its
runs x budget), on all grids and per collection. It makes no fit and reads no policy; it says which compute
levels the grids allow. ``bench/replay_frontier.py`` measures each knob point's distance to the same floor
(:func:`~rl_core.scaling.measure.frontier.grid_floors`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay import add_corpus_args
from bench.replay_frontier import GOAL_COMPUTE, TUNED_COLLECTIONS, all_grids
from rl_core.scaling.measure.frontier import FLOOR_STARTS, grid_floors
from rl_core.scaling.measure.replay import load_grid


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--starts", type=float, nargs="+", default=list(FLOOR_STARTS))
    args = ap.parse_args(argv)
    rows: list[tuple[str, str, int, list[float]]] = []
    for g, coll in all_grids(args.curves, args.public, args.engine):
        runs = load_grid(list(g.files), g.x, g.y)
        floors = grid_floors(runs, args.starts)
        rows.append((g.name, coll, len(runs), [floors[s] for s in args.starts]))
    groups = [("all grids", rows), ("held out", [r for r in rows if r[1] not in TUNED_COLLECTIONS])]
    groups += [(c, [r for r in rows if r[1] == c]) for c in sorted({r[1] for r in rows})]
    head = " | ".join(f"floor, start {s:.3g}" for s in args.starts)
    above = f"grids whose floor at {args.starts[0]:.3g} > {GOAL_COMPUTE} | at {args.starts[1]:.3g}"
    print(f"| grids | n | median runs | {head} | {above} |")
    print("|---|---|---|" + "---|" * len(args.starts) + "---|---|")
    for label, rs in groups:
        means = " | ".join(f"{np.mean([r[3][k] for r in rs]):.3f}" for k in range(len(args.starts)))
        above = " | ".join(str(sum(r[3][k] > GOAL_COMPUTE for r in rs)) for k in (0, 1))
        print(f"| {label} | {len(rs)} | {np.median([r[2] for r in rs]):.0f} | {means} | {above} |")


if __name__ == "__main__":
    main()
