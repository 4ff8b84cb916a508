"""The forecast backtest on every collection at once, side by side: where the default forecaster stands against the
three baselines of the forecasting goal (the paper's procedure, a power law, the last value) on each collection
of real curves.

    python bench/forecast_all.py [--curves ../shared/curves] [--engine tests/fixtures/engine_grids]
                                 [--public tests/fixtures/public_grids] [--only NAME ...] [--cutoffs 0.3,0.5]
                                 [--markdown] [--json FILE]

Collections: ``shared/curves`` (x and y as ``scalerl backtest`` picks them), the engine's recorded grids (x =
training FLOPs) and every public study under ``--public`` (its ``study.json`` names x and y; default step and
pass_rate). Each is scored exactly as ``scalerl backtest DIR --grids --methods fast,paper,power_law,last_value,grid
--prior none`` scores it (flat priors: the forecaster's default; ``fast`` is the per-run fit, ``grid`` the joint fit
of a grid's runs that the service uses for an experiment), on the informative curves (the early-saturating ones left
out), medians over near-duplicate groups.

Per collection and cut-off it prints the median tail MAE of each method (with its 80% band's coverage), the best
baseline, the ratio of the better scalerl forecast to it and two goals: the ratio (≤ 1.05 at the 0.3 cut-off, < 1 at
0.5) and the band (the grid forecast's 80% band covering 0.75-0.85 of the held-out points). Below the table, over the
collections: the geometric mean of each method's ratio to its collection's best baseline, on how many collections
each method is below that best baseline, and on how many each goal is met. Nothing is learned here: the collections
are scored as they are (the calibration each is read through was learned without it).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from replay import add_corpus_args  # bench/replay.py

from rl_core.scaling.fit.calibration import RAW, ForecastCalibration
from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.measure.backtest import SummaryRow, run_backtest, summarize
from rl_core.scaling.measure.calibration_learn import COVERAGE_GOAL, TOLERANCE, learn_calibration
from rl_core.scaling.measure.corpus import load_curves
from rl_core.scaling.measure.forecast_cases import ForecastCase

REPO = Path(__file__).resolve().parents[1]
METHODS = ("fast", "grid", "paper", "power_law", "last_value")
BASELINES = ("paper", "power_law", "last_value")
SCALERL = ("fast", "grid")


@dataclass(frozen=True)
class Collection:
    name: str
    directory: Path
    x: str | None
    y: str | None


def collections(curves: Path, engine: Path, public: Path) -> list[Collection]:
    """Every collection of real curves the project holds, each scored on its own."""
    out = []
    if curves.is_dir():
        out.append(Collection("shared/curves", curves, None, None))
    if engine.is_dir():
        out.append(Collection("engine grids", engine, "train_flops", "pass_rate"))
    for study in sorted(p.parent for p in public.glob("*/ablations.json")) if public.is_dir() else []:
        axes = json.loads((study / "study.json").read_text()) if (study / "study.json").is_file() else {}
        out.append(Collection(study.name, study, axes.get("x", "step"), axes.get("y", "pass_rate")))
    return out


def score(c: Collection, cutoffs: tuple[float, ...], calibration: ForecastCalibration | None) -> list[SummaryRow]:
    curves, _ = load_curves(c.directory, c.x, c.y)
    report = run_backtest(
        curves, cutoffs, METHODS, FitOptions(prior=None), directory=c.directory, calibration=calibration
    )
    return [r for r in summarize(report) if r.subset == "informative"]


def calibration_for(name: str, mode: str, cases_file: Path) -> ForecastCalibration | None:
    """``loco``: learned from the cached cases of every *other* collection (bench/forecast_cases.py); ``shipped``
    (None: the shipped file, which learned from every collection here) or ``raw`` (the sigmoid's raw posterior)."""
    if mode == "raw":
        return RAW
    if mode == "shipped":
        return None
    if not cases_file.is_file():
        raise SystemExit(f"error: no cases at {cases_file}; run bench/forecast_cases.py first (or --calibration raw)")
    data = json.loads(cases_file.read_text())
    cases = [ForecastCase.from_json(k) for coll, ks in data["collections"].items() if coll != name for k in ks]
    return learn_calibration(cases, f"loco-{name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--only", action="append", help="Only these collections (repeatable; names as printed).")
    ap.add_argument("--cutoffs", default="0.3,0.5")
    ap.add_argument("--markdown", action="store_true", help="Print the table as markdown (for the docs).")
    ap.add_argument("--json", type=Path, help="Write every row as JSON here.")
    ap.add_argument(
        "--calibration",
        choices=("loco", "shipped", "raw"),
        default="loco",
        help="How fast/grid forecasts are read: calibrated leave-one-collection-out (default), with the shipped "
        "calibration (which learned from every collection here: optimistic) or the sigmoid's raw posterior.",
    )
    ap.add_argument("--cases", type=Path, default=REPO / "bench" / "out" / "forecast_cases.json")
    args = ap.parse_args()
    cutoffs = tuple(float(v) for v in args.cutoffs.split(","))
    chosen = [c for c in collections(args.curves, args.engine, args.public) if not args.only or c.name in args.only]
    if not chosen:
        raise SystemExit("error: no collection to score (check --curves, --engine, --public and --only)")

    t0 = time.perf_counter()
    table: dict[str, dict[float, dict[str, SummaryRow]]] = {}
    for c in chosen:
        rows = score(c, cutoffs, calibration_for(c.name, args.calibration, args.cases))
        table[c.name] = {f: {r.method: r for r in rows if r.cutoff == f} for f in cutoffs}
        print(f"# {c.name}: {time.perf_counter() - t0:.0f} s", flush=True)

    sep = " | " if args.markdown else "  "
    head = [
        "collection",
        "cut-off",
        "groups",
        *METHODS,
        "best baseline",
        "scalerl / best",
        "ratio goal",
        "band goal",
        "grid / PL,LV",
    ]
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    else:
        print(sep.join(h.rjust(10) for h in head))
    ratios: dict[float, dict[str, list[float]]] = {f: {m: [] for m in METHODS} for f in cutoffs}
    met: dict[float, dict[str, list[bool]]] = {f: {"ratio": [], "band": []} for f in cutoffs}
    record = []
    for name, by_cut in table.items():
        for f in cutoffs:
            row = by_cut[f]
            mae = {m: row[m].median_tail_mae for m in METHODS}
            if any(v is None for v in mae.values()):
                continue
            best_base = min(mae[m] for m in BASELINES if mae[m] is not None)
            best_ours = min(mae[m] for m in SCALERL if mae[m] is not None)
            ratio = best_ours / best_base
            goal = ratio <= TOLERANCE if f < 0.4 else ratio < 1.0
            cover = row["grid"].coverage
            band = cover is not None and COVERAGE_GOAL[0] <= cover <= COVERAGE_GOAL[1]
            met[f]["ratio"].append(goal)
            met[f]["band"].append(band)
            for m in METHODS:
                ratios[f][m].append(mae[m] / best_base)  # type: ignore[operator]
            cells = [
                name,
                f"{f:g}",
                str(row["fast"].n_groups),
                *(
                    f"{mae[m]:.4f}" + (f" ({row[m].coverage:.2f})" if row[m].coverage is not None else "")
                    for m in METHODS
                ),
                f"{best_base:.4f} ({min(BASELINES, key=lambda m: mae[m])})",
                f"{ratio:.2f}",
                "met" if goal else "not met",
                "met" if band else "not met",
                f"{mae['grid'] / min(mae['power_law'], mae['last_value']):.2f}",  # type: ignore[operator]
            ]
            record.append(
                {
                    "collection": name,
                    "cutoff": f,
                    "mae": mae,
                    "best_baseline": best_base,
                    "ratio": ratio,
                    "coverage": {m: row[m].coverage for m in SCALERL},
                    "ratio_goal": goal,
                    "band_goal": band,
                }
            )
            print(("| " + " | ".join(cells) + " |") if args.markdown else sep.join(v.rjust(10) for v in cells))
    print()
    for f in cutoffs:
        parts = []
        for m in METHODS:
            rs = ratios[f][m]
            if rs:
                gm = float(np.exp(np.mean(np.log(rs))))
                parts.append(f"{m} {gm:.3f} (below the best baseline on {sum(r < 1 for r in rs)} of {len(rs)})")
        print(f"cut-off {f:g}, geometric mean of tail MAE / the collection's best baseline: " + "; ".join(parts))
        wanted = f"≤ {TOLERANCE:g}×" if f < 0.4 else "< 1×"
        print(
            f"cut-off {f:g}, goals met: the better scalerl forecast {wanted} the best baseline on "
            f"{sum(met[f]['ratio'])} of {len(met[f]['ratio'])} collections; the grid forecast's 80% band within "
            f"{COVERAGE_GOAL[0]:g}-{COVERAGE_GOAL[1]:g} on {sum(met[f]['band'])} of {len(met[f]['band'])}"
        )
    print(f"# {len(chosen)} collections in {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
