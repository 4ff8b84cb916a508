"""scalerl's compute–regret frontier beside each Optuna pruner's, on every recorded grid and per collection.

    python bench/replay_frontier.py [--orders 5] [--grid NAME ...] [--part K/N] [--json FILE] [--plot FILE.html]
    python bench/replay_frontier.py --merge a.json b.json [--plot FILE.html]     # tables from split runs

(also ``python bench/replay.py --frontier``.) scalerl is replayed with its enacted stops (``auto_stop``) at every
``compute_target`` of :data:`rl_core.scaling.measure.frontier.TARGETS` (``default``: no target, today's policy),
with flat priors as ``bench/replay.py``'s default; the pruners at every setting of ``PRUNER_SETTINGS``. A grid's
*collection* is its public study, ``shared`` (shared/curves) or ``engine``. :data:`TUNED_COLLECTIONS` are the
collections a choice of the knob may look at; every other collection is held out from every choice
(docs/decisions.md, "One knob").
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay import GridSpec, add_corpus_args, engine_grids, public_grids, shared_grids
from rl_core.scaling.decide.grid_decisions import GridFitter
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.measure.frontier import (
    TARGETS,
    GridScore,
    Setting,
    at_compute,
    compare,
    points,
    pruner_frontier,
    scalerl_frontier,
)
from rl_core.scaling.measure.replay import cached_fitter, load_grid
from scalerl.cli.replay_frontier import frontier_table, losses, write_plot

#: The collections a choice of the knob looked at: shared and engine (where the rules' thresholds were tuned), and
#: the two public grids replayed while the schedule was built (grpo_math1p5b's lr, soft_grpo's 7b: they showed that
#: protecting the best comparator too left a 3-run grid nothing to stop, and that a schedule blind to the number
#: of runs could not spend its target). Every other collection is held out from every choice.
TUNED_COLLECTIONS = ("shared", "engine", "grpo_math1p5b", "soft_grpo")
#: The goals: at this mean compute, mean regret at most GOAL_MEAN and no grid above GOAL_WORST.
GOAL_COMPUTE, GOAL_MEAN, GOAL_WORST = 0.30, 0.005, 0.02

Table = dict[Setting, list[GridScore]]


def all_grids(curves: Path, public: Path, engine: Path) -> list[tuple[GridSpec, str]]:
    """Every grid with its collection."""
    out = [(g, "shared") for g in shared_grids(curves)] + [(g, "engine") for g in engine_grids(engine)]
    for g in public_grids(public):
        out.append((g, g.files[0].resolve().relative_to(public.resolve()).parts[0]))
    return out


def selected_grids(
    curves: Path, public: Path, engine: Path, names: Sequence[str] | None, part: str | None
) -> list[tuple[GridSpec, str]]:
    """:func:`all_grids`, only those named (``--grid``), then only part k of n (``--part k/n``, to split over
    processes)."""
    grids = all_grids(curves, public, engine)
    if names:
        grids = [(g, c) for g, c in grids if g.name in names]
    if part:
        k, n = (int(v) for v in part.split("/"))
        grids = grids[k - 1 :: n]
    return grids


def disk_fitter(path: Path | None) -> tuple[GridFitter, dict[bytes, list[CurveFit]]]:
    """:func:`~rl_core.scaling.measure.replay.cached_fitter` with its memo loaded from ``path`` (one file per grid)
    and saved there by :func:`save_fits`: a fit depends on its points only, so the numbers are those of a run
    without the cache."""
    memo: dict[bytes, list[CurveFit]] = pickle.loads(path.read_bytes()) if path is not None and path.exists() else {}
    return cached_fitter(memo=memo), memo


def save_fits(path: Path | None, memo: dict[bytes, list[CurveFit]], size: int) -> None:
    """Write ``memo`` to ``path`` if it grew past ``size``; atomic, so processes sharing the folder never read half a
    file."""
    if path is None or len(memo) <= size:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(memo))
    tmp.replace(path)


def run(
    grids: Sequence[tuple[GridSpec, str]],
    orders: int,
    pruners: bool,
    out: Path | None = None,
    targets: Sequence[float | None] = TARGETS,
    cache: Path | None = None,
) -> tuple[Table, dict[str, str]]:
    """Every setting on every grid; with ``out``, the scores so far are written there after each grid; with
    ``cache``, the fits are kept on disk between runs (:func:`disk_fitter`)."""
    table: Table = {}
    collection: dict[str, str] = {}
    for g, coll in grids:
        started = time.perf_counter()
        runs = load_grid(list(g.files), g.x, g.y)
        collection[g.name] = coll
        path = None if cache is None else cache / f"{g.name}.pkl"
        fitter, memo = disk_fitter(path)
        size = len(memo)
        rows = scalerl_frontier(g.name, runs, targets, fitter=fitter)
        save_fits(path, memo, size)
        if pruners:
            rows += pruner_frontier(g.name, runs, orders)
        for setting, s in rows:
            table.setdefault(setting, []).append(s)
        print(f"# {g.name} ({len(runs)} runs): {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if out is not None:
            out.write_text(json.dumps(dump(table, collection), indent=1))
    return table, collection


def parse_target(text: str) -> float | None:
    """``--targets`` values: a number in (0, 1], or ``default`` (no target)."""
    return None if text == "default" else float(text)


def dump(table: Table, collection: dict[str, str]) -> dict[str, object]:
    return {
        "collection": collection,
        "settings": [
            {"policy": k.policy, "label": k.label, "mode": k.mode, "grids": [s.to_dict() for s in v]}
            for k, v in table.items()
        ],
    }


def load(paths: Sequence[Path]) -> tuple[Table, dict[str, str]]:
    """The scores of several ``--json`` files as one table."""
    table: Table = {}
    collection: dict[str, str] = {}
    for p in paths:
        data = json.loads(p.read_text())
        collection.update(data["collection"])
        for row in data["settings"]:
            key = Setting(row["policy"], row["label"], row["mode"])
            have = {s.grid for s in table.get(key, [])}  # a grid replayed by two split runs counts once
            table.setdefault(key, []).extend(GridScore(**g) for g in row["grids"] if g["grid"] not in have)
    return table, collection


def report(table: Table, collection: dict[str, str]) -> list[str]:
    """The frontier tables and the goals, over all grids, the held-out ones, and each collection."""
    colls = sorted(set(collection.values()))
    held = [c for c in colls if c not in TUNED_COLLECTIONS]
    groups: list[tuple[str, set[str]]] = [
        ("all grids", set(collection)),
        (f"the held-out collections ({', '.join(held)})", {g for g, c in collection.items() if c in held}),
    ] + [(f"collection {c}", {g for g, cc in collection.items() if cc == c}) for c in colls]
    out: list[str] = []
    for label, names in groups:
        pts = points(table, lambda g, names=names: g in names)  # type: ignore[misc]
        if not pts:
            continue
        ours = [p for p in pts if p.setting.policy == "scalerl"]
        theirs = [p for p in pts if p.setting.policy != "scalerl"]
        out += [
            f"### Frontier over {label}: {pts[0].grids} grids",
            "",
            *frontier_table(pts),
            "",
            *losses(compare(ours, theirs)),
        ]
        goal = at_compute(ours, GOAL_COMPUTE)
        if goal is None:
            out.append(f"At {GOAL_COMPUTE:.2f} of the compute: no scalerl setting spends that little.")
        else:
            ok = goal.regret <= GOAL_MEAN and goal.regret_worst <= GOAL_WORST
            out.append(
                f"At {GOAL_COMPUTE:.2f} of the compute (scalerl {goal.setting.label}, {goal.compute:.3f}): mean regret "
                f"{goal.regret:.4f} (goal <= {GOAL_MEAN}), worst grid {goal.regret_worst:.4f} ({goal.worst_grid}; goal "
                f"<= {GOAL_WORST}): {'met' if ok else 'not met'}."
            )
        out.append("")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--orders", type=int, default=5, help="Random orders per pruner setting.")
    ap.add_argument("--grid", action="append", help="Only these grids (repeatable).")
    ap.add_argument("--part", help="K/N: only the K-th of N slices of the grids (to split a run over processes).")
    ap.add_argument("--no-pruners", action="store_true")
    ap.add_argument(
        "--targets",
        type=parse_target,
        nargs="+",
        default=list(TARGETS),
        help="scalerl's compute targets (default: no target).",
    )
    ap.add_argument("--cache", type=Path, help="A folder for the fits memo, one file per grid.")
    ap.add_argument("--json", type=Path, help="Write the per-grid scores here.")
    ap.add_argument("--merge", type=Path, nargs="+", help="Print the tables from these --json files; replay nothing.")
    ap.add_argument("--plot", type=Path, help="Write the frontier as a Plotly HTML here.")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    if args.merge:
        table, collection = load(args.merge)
    else:
        grids = selected_grids(args.curves, args.public, args.engine, args.grid, args.part)
        table, collection = run(grids, args.orders, not args.no_pruners, args.json, args.targets, args.cache)
    print("\n".join(report(table, collection)))
    if args.plot:
        write_plot(
            points(table, lambda g: g in collection), args.plot, f"Compute–regret frontier, {len(collection)} grids"
        )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
