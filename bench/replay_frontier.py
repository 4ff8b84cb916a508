"""scalerl's compute–regret frontier beside each Optuna pruner's, on every recorded grid and per collection.

    python bench/replay_frontier.py [--orders 5] [--grid NAME ...] [--part K/N] [--json FILE] [--plot FILE.html]
    python bench/replay_frontier.py --merge a.json b.json [--plot FILE.html]     # tables from split runs

(also ``python bench/replay.py --frontier``.) scalerl is replayed with its enacted stops (``auto_stop``) at every
``compute_target`` of :data:`rl_core.scaling.measure.frontier.TARGETS` (``default``: no target, today's policy),
with flat priors as ``bench/replay.py``'s default; the pruners at every setting of ``PRUNER_SETTINGS``. A grid's
*collection* is its public study, ``shared`` (shared/curves) or ``engine``. :data:`TUNED_COLLECTIONS` are the
collections a choice of the knob may look at; every other collection is held out from every choice
(docs/decisions.md, "One knob").

Per collection (and over all grids, the tuned collections and the held-out ones) the report says whether the knob is
monotone (as the target rises, mean compute never falls and mean regret never rises; the default sits at 0.5), which
of the pruner settings some knob point matches (no more mean compute and no more mean regret), and how far each knob
point's mean compute sits above the mean oracle floor of its grids (``oracle_floor`` judging from the first
evaluation, as ``bench/frontier_floor.py``; kept in ``--json``, and computed from the grids by ``--merge`` for a file
without it).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay import GridSpec, add_corpus_args, engine_grids, public_grids, shared_grids
from rl_core.scaling.decide.grid_decisions import GridFitter
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.measure.frontier import (
    TARGETS,
    GridScore,
    Setting,
    at_compute,
    grid_floors,
    points,
    pruner_frontier,
    scalerl_frontier,
)
from rl_core.scaling.measure.frontier_report import FLOOR_START, floor_gaps, match_pruners, monotonicity
from rl_core.scaling.measure.replay import cached_fitter, load_grid
from scalerl.cli.replay_frontier import (
    floor_goal_lines,
    floor_line,
    floor_table,
    frontier_table,
    match_lines,
    monotone_lines,
    write_plot,
)

#: The collections a choice of the knob looked at: shared and engine (where the rules' thresholds were tuned), and
#: the two public grids replayed while the schedule was built (grpo_math1p5b's lr, soft_grpo's 7b: they showed that
#: protecting the best comparator too left a 3-run grid nothing to stop, and that a schedule blind to the number
#: of runs could not spend its target). Every other collection is held out from every choice.
TUNED_COLLECTIONS = ("shared", "engine", "grpo_math1p5b", "soft_grpo")
#: The goals: at this mean compute, mean regret at most GOAL_MEAN and no grid above GOAL_WORST.
GOAL_COMPUTE, GOAL_MEAN, GOAL_WORST = 0.30, 0.005, 0.02
#: The goals on the distance to the oracle's floor, (mean compute above the mean floor, mean regret): some knob
#: point within GOAL_NEAR_FLOOR, and the default within GOAL_DEFAULT_FLOOR.
GOAL_NEAR_FLOOR, GOAL_DEFAULT_FLOOR = (0.10, 0.005), (0.15, 0.003)

Table = dict[Setting, list[GridScore]]
#: Each grid's oracle floor by start (:func:`~rl_core.scaling.measure.frontier.grid_floors`).
Floors = dict[str, dict[float, float]]


@dataclass
class Scores:
    """What a replay (or the ``--json`` files it wrote) holds: the per-grid scores of every setting, each grid's
    collection, and each grid's oracle floor."""

    table: Table = field(default_factory=dict)
    collection: dict[str, str] = field(default_factory=dict)
    floors: Floors = field(default_factory=dict)


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
) -> Scores:
    """Every setting on every grid, and each grid's oracle floor; with ``out``, the scores so far are written there
    after each grid; with ``cache``, the fits are kept on disk between runs (:func:`disk_fitter`)."""
    scores = Scores()
    for g, coll in grids:
        started = time.perf_counter()
        runs = load_grid(list(g.files), g.x, g.y)
        scores.collection[g.name] = coll
        scores.floors[g.name] = grid_floors(runs)
        path = None if cache is None else cache / f"{g.name}.pkl"
        fitter, memo = disk_fitter(path)
        size = len(memo)
        rows = scalerl_frontier(g.name, runs, targets, fitter=fitter)
        save_fits(path, memo, size)
        if pruners:
            rows += pruner_frontier(g.name, runs, orders)
        for setting, s in rows:
            scores.table.setdefault(setting, []).append(s)
        print(f"# {g.name} ({len(runs)} runs): {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if out is not None:
            out.write_text(json.dumps(dump(scores), indent=1))
    return scores


def corpus_floors(names: Sequence[str], curves: Path, public: Path, engine: Path) -> Floors:
    """The oracle floors of the grids named, read from the corpus (for ``--json`` files written without them);
    grids the corpus does not have are left out."""
    want = set(names)
    return {
        g.name: grid_floors(load_grid(list(g.files), g.x, g.y))
        for g, _ in all_grids(curves, public, engine)
        if g.name in want
    }


def parse_target(text: str) -> float | None:
    """``--targets`` values: a number in (0, 1], or ``default`` (no target)."""
    return None if text == "default" else float(text)


def dump(scores: Scores) -> dict[str, object]:
    return {
        "collection": scores.collection,
        "oracle_floor": {g: [{"start": k, "compute": v} for k, v in f.items()] for g, f in scores.floors.items()},
        "settings": [
            {"policy": k.policy, "label": k.label, "mode": k.mode, "grids": [s.to_dict() for s in v]}
            for k, v in scores.table.items()
        ],
    }


def load(paths: Sequence[Path]) -> Scores:
    """The scores of several ``--json`` files as one (files written before the floor was kept have none)."""
    scores = Scores()
    for p in paths:
        data = json.loads(p.read_text())
        scores.collection.update(data["collection"])
        for g, fs in data.get("oracle_floor", {}).items():
            scores.floors[g] = {float(f["start"]): float(f["compute"]) for f in fs}
        for row in data["settings"]:
            key = Setting(row["policy"], row["label"], row["mode"])
            have = {s.grid for s in scores.table.get(key, [])}  # a grid replayed by two split runs counts once
            scores.table.setdefault(key, []).extend(GridScore(**g) for g in row["grids"] if g["grid"] not in have)
    return scores


def groups(collection: dict[str, str]) -> list[tuple[str, set[str]]]:
    """The sets of grids the report covers: all, the tuned collections, the held-out ones, and each collection."""
    colls = sorted(set(collection.values()))
    tuned = [c for c in colls if c in TUNED_COLLECTIONS]
    held = [c for c in colls if c not in TUNED_COLLECTIONS]
    return [
        ("all grids", set(collection)),
        (f"tuned ({', '.join(tuned)})", {g for g, c in collection.items() if c in tuned}),
        (f"held out ({', '.join(held)})", {g for g, c in collection.items() if c in held}),
    ] + [(f"collection {c}", {g for g, cc in collection.items() if cc == c}) for c in colls]


def report(scores: Scores) -> list[str]:
    """Per set of grids (:func:`groups`): the frontier table, the knob's monotonicity, the pruner settings it
    matches, its distance to the oracle's floor, and the goals."""
    table = scores.table
    out: list[str] = []
    for label, names in groups(scores.collection):
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
            *monotone_lines(monotonicity(table, lambda g, names=names: g in names)),  # type: ignore[misc]
            "",
            *match_lines(match_pruners(ours, theirs)),
            "",
        ]
        missing = sorted(names - scores.floors.keys())
        if missing:
            out.append(f"Distance to the floor: no oracle floor for {len(missing)} grids ({', '.join(missing)}).")
        else:
            floors = {g: scores.floors[g][FLOOR_START] for g in names}
            starts = [k for k in scores.floors[min(names)] if all(k in scores.floors[g] for g in names)]
            means = {k: float(np.mean([scores.floors[g][k] for g in names])) for k in starts}
            gaps = floor_gaps(table, lambda g, names=names: g in names, floors)  # type: ignore[misc]
            out += [
                floor_line(means),
                "",
                *floor_table(gaps),
                "",
                *floor_goal_lines(gaps, GOAL_NEAR_FLOOR, GOAL_DEFAULT_FLOOR),
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
        scores = load(args.merge)
        missing = sorted(scores.collection.keys() - scores.floors.keys())
        if missing:
            scores.floors.update(corpus_floors(missing, args.curves, args.public, args.engine))
    else:
        grids = selected_grids(args.curves, args.public, args.engine, args.grid, args.part)
        scores = run(grids, args.orders, not args.no_pruners, args.json, args.targets, args.cache)
    print("\n".join(report(scores)))
    if args.plot:
        n = len(scores.collection)
        write_plot(
            points(scores.table, lambda g: g in scores.collection), args.plot, f"Compute–regret frontier, {n} grids"
        )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
