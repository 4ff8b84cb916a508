"""scalerl's decisions alone on every recorded grid, for several values of one Policy field, side by side:
the measurement behind ``seed_z`` (docs/decisions.md, "Seeds that take off at different times").

    python bench/experiments/seed_spread_sweep.py [--field seed_z] [--values inf,2.5,1.5] [--grid NAME ...]

Grids and fitter as ``bench/replay.py`` (flat priors); per grid compute / regret for each value, then means over
all grids, over the grids with seeds of one recipe, and over the public studies' grids.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.replay import REPO, engine_grids, public_grids, shared_grids
from rl_core.scaling import Policy
from rl_core.scaling.measure.replay import load_grid, replay, replicate_key, scalerl_policy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--field", default="seed_z")
    ap.add_argument("--values", default="inf,2.5")
    ap.add_argument("--grid", action="append")
    args = ap.parse_args()
    values = [float(v) for v in args.values.split(",")]
    grids = (
        shared_grids(REPO.parent / "shared" / "curves")
        + engine_grids(REPO / "tests" / "fixtures" / "engine_grids")
        + public_grids(REPO / "tests" / "fixtures" / "public_grids")
    )
    if args.grid:
        grids = [g for g in grids if g.name in args.grid]
    t0 = time.perf_counter()
    rows: dict[str, list[tuple[float, float, float | None]]] = {}
    seeded: set[str] = set()
    print(
        "grid: compute / regret [/ recipe regret]".ljust(44) + "".join(f"{args.field}={v:g}".rjust(32) for v in values)
    )
    for g in grids:
        runs = load_grid(list(g.files), g.x, g.y)
        keys = [replicate_key(r.name) for r in runs]
        if any(k is not None and keys.count(k) >= 2 for k in keys):
            seeded.add(g.name)
        out = []
        for v in values:
            r = replay("scalerl", runs, scalerl_policy(replace(Policy(), **{args.field: v})))
            out.append((r.compute, r.regret, r.recipe_regret))
        rows[g.name] = out
        mark = " (seeds)" if g.name in seeded else ""
        cells = [f"{c:.3f} / {r:.4f}" + ("" if rr is None else f" / {rr:.4f}") for c, r, rr in out]
        print((g.name + mark)[:43].ljust(44) + "".join(c.rjust(32) for c in cells), flush=True)
    for label, names in (
        ("all", list(rows)),
        ("with seeds", [n for n in rows if n in seeded]),
        ("without seeds", [n for n in rows if n not in seeded]),
    ):
        if not names:
            continue
        cells = []
        for k in range(len(values)):
            c = np.mean([rows[n][k][0] for n in names])
            r = np.mean([rows[n][k][1] for n in names])
            w = max(rows[n][k][1] for n in names)
            rr = [x for n in names if (x := rows[n][k][2]) is not None]
            by_recipe = f", recipe regret {np.mean(rr):.4f}" if rr else ""
            cells.append(f"{c:.3f} / {r:.4f} (worst {w:.4f}{by_recipe})")
        pairs = zip(values, cells, strict=True)
        print(f"mean over {len(names)} grids {label}: " + " | ".join(f"{v:g}: {c}" for v, c in pairs))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
