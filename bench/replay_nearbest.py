"""Which rules stop near-best runs (the runner-up told to stop early), grid by grid, for scalerl's default policy or a
variant of it: compute, regret and every near-best run stopped with the rule that stopped it.

    python bench/replay_nearbest.py [--set rung=none] [--targets 1] [--grid NAME ...] [--part K/N]
                                    [--cache DIR] [--json FILE]
    python bench/replay_nearbest.py --merge a.json b.json      # the tables of split runs

A *near-best* run is one whose recipe ends within the grid's tolerance of the best recipe
(:func:`rl_core.scaling.measure.frontier.near_best_stops`). Fits are memoised on the points as the replays' own
(:func:`~rl_core.scaling.measure.replay.cached_fitter`), and with ``--cache`` also kept on disk per grid between
runs (a fit depends on its points only: the numbers are those of a run without the cache). The grids and their
collections are ``bench/replay_frontier.py``'s; the collections a choice looked at are listed in the output with
the held-out ones separately.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay import add_corpus_args
from bench.replay_frontier import TUNED_COLLECTIONS, disk_fitter, parse_target, save_fits, selected_grids
from rl_core.scaling.decide.policy import FLAT_RULE_KEYS, Policy
from rl_core.scaling.measure.frontier import near_best_stopped, recipe_finals, stop_rule, target_label
from rl_core.scaling.measure.replay import ReplayResult, RunCurve, load_grid, replay, scalerl_policy
from rl_core.scaling.measure.verdict_score import tolerance


def parse_set(items: Sequence[str]) -> dict[str, object]:
    """``name=value`` pairs for :class:`Policy` fields (``none``, ``inf``, numbers); a rule block is turned off with
    ``none`` (``rung=none``) and its settings are set by their flat names (``rung_margin=0.02``, ``behind_z=3``),
    which :class:`Policy` reads into the block."""
    types = {f.name for f in fields(Policy)} | set(FLAT_RULE_KEYS)
    out: dict[str, object] = {}
    for item in items:
        name, value = item.split("=", 1)
        if name not in types:
            raise SystemExit(f"unknown Policy field {name!r}")
        low = value.lower()
        if name in ("behind", "rung", "resume", "fall") and low != "none":
            raise SystemExit(f"{name}: only {name}=none (off); set its settings by their flat names")
        out[name] = None if low == "none" else True if low == "true" else False if low == "false" else float(value)
        if name in ("hold", "min_live", "behind_points", "max_resumes") and out[name] is not None:
            out[name] = int(float(value))
    return out


def near_best(result: ReplayResult, runs: Sequence[RunCurve]) -> tuple[float, list[dict[str, object]]]:
    """The grid's tolerance and every near-best run stopped: where (a fraction of the budget), by which rule, and
    how far its recipe ends below the best."""
    value, best = recipe_finals(result, runs)
    at = {o.name: o.stopped_at for o in result.runs}
    return tolerance(runs, result.budget), [
        {"run": n, "at": float(at[n] or 0.0) / result.budget, "rule": rule, "gap": best - value[n]}
        for n, rule in near_best_stopped(result, runs)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--set", action="append", default=[], help="Policy field=value (repeatable).")
    ap.add_argument("--targets", type=parse_target, nargs="+", default=[None], help="compute targets (default: none)")
    ap.add_argument("--grid", action="append")
    ap.add_argument("--part")
    ap.add_argument("--cache", type=Path, help="A folder for the fits memo, one file per grid.")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--merge", type=Path, nargs="+")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    rows: list[dict[str, object]] = []
    if args.merge:
        for p in args.merge:
            rows += json.loads(p.read_text())
    else:
        base = Policy(**parse_set(args.set))  # type: ignore[arg-type]
        grids = selected_grids(args.curves, args.public, args.engine, args.grid, args.part)
        for g, coll in grids:
            t0 = time.perf_counter()
            runs = load_grid(list(g.files), g.x, g.y)
            cache = None if args.cache is None else args.cache / f"{g.name}.pkl"
            fit, memo = disk_fitter(cache)
            size = len(memo)
            for t in args.targets:
                pol = replace(base, compute_target=t)
                res = replay("scalerl", runs, scalerl_policy(pol, fitter=fit))
                tol, near = near_best(res, runs)
                rows.append(
                    {
                        "grid": g.name,
                        "collection": coll,
                        "target": t,
                        "runs": len(runs),
                        "compute": res.compute,
                        "regret": res.regret,
                        "tolerance": tol,
                        "near_best": near,
                        "stops": {o.name: stop_rule(o.reason) for o in res.runs if o.stopped_at is not None},
                    }
                )
            save_fits(cache, memo, size)
            print(f"# {g.name} ({len(runs)} runs): {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    print("\n".join(report(rows)))
    print(f"({time.perf_counter() - started:.0f} s)")


def report(rows: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for t in sorted({r["target"] for r in rows}, key=lambda t: -2.0 if t is None else -t):
        sub = [r for r in rows if r["target"] == t]
        for label, colls in (
            ("all", None),
            ("tuned (" + ", ".join(TUNED_COLLECTIONS) + ")", True),
            ("held out", False),
        ):
            s = [r for r in sub if colls is None or (r["collection"] in TUNED_COLLECTIONS) == colls]
            if not s:
                continue
            near = [nb for r in s for nb in r["near_best"]]
            by_rule: dict[str, int] = {}
            for nb in near:
                by_rule[nb["rule"]] = by_rule.get(nb["rule"], 0) + 1
            worst = max(s, key=lambda r: r["regret"])
            out.append(
                f"{target_label(t)}, {label}: {len(s)} grids, compute {np.mean([r['compute'] for r in s]):.3f}, "
                f"regret {np.mean([r['regret'] for r in s]):.4f} (worst {worst['regret']:.4f} {worst['grid']}), "
                f"near-best stops {len(near)} on {sum(1 for r in s if r['near_best'])} grids {by_rule}"
            )
    return out


if __name__ == "__main__":
    main()
