"""Backtest of the adaptive band (rl_core/scaling/fit/adaptive_band.py), leave one collection out.

    python bench/forecast_cases.py --cutoffs 0.1,0.2,0.3,0.4,0.5,0.6     # fit every collection once (~1-2 min)
    python bench/adaptive_band.py [--cases bench/out/forecast_cases.json] [--cutoffs 0.3,0.5]
                                  [--prior-strength 5] [--min-reach 0.25] [--include-own] [--markdown]

Per collection, cut-off and fitter: the share of held-out points inside the calibrated 80% band as shipped (the
calibration learned from the *other* collections, as bench/build_forecast_calibration.py scores it) and inside the
adaptive band, whose scale comes only from the earlier forecasts of the collection's *other* curves (with
``--include-own``, and the curve's own, as the service scores them) scored on the points that had arrived by the
cut-off (rl_core/scaling/measure/adaptive_backtest.py). Below, per cut-off and
fitter, on how many collections with >= 10 groups each band is inside the goal 75-85%. Point forecasts are not
changed by the band, so their errors are those of bench/build_forecast_calibration.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rl_core.scaling.fit.adaptive_band import AdaptiveBandOptions
from rl_core.scaling.measure.adaptive_backtest import leave_one_collection_out_adaptive
from rl_core.scaling.measure.calibration_learn import COVERAGE_GOAL
from rl_core.scaling.measure.forecast_cases import ForecastCase

REPO = Path(__file__).resolve().parents[1]
MIN_GROUPS = 10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=REPO / "bench" / "out" / "forecast_cases.json")
    ap.add_argument("--cutoffs", default="0.3,0.5")
    ap.add_argument("--prior-strength", type=float, default=AdaptiveBandOptions().prior_strength)
    ap.add_argument("--min-reach", type=float, default=AdaptiveBandOptions().min_reach)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--include-own",
        action="store_true",
        help="A curve's own earlier forecasts count among its residuals, as the service scores them.",
    )
    args = ap.parse_args()
    if not args.cases.is_file():
        raise SystemExit(f"error: no cases at {args.cases}; run bench/forecast_cases.py first")
    raw = json.loads(args.cases.read_text())
    cases = [ForecastCase.from_json(c) for cs in raw["collections"].values() for c in cs]
    cutoffs = tuple(float(v) for v in args.cutoffs.split(","))
    t0 = time.perf_counter()
    blocks = leave_one_collection_out_adaptive(
        cases,
        cutoffs,
        AdaptiveBandOptions(prior_strength=args.prior_strength, min_reach=args.min_reach),
        include_own=args.include_own,
    )
    head = [
        "collection",
        "cut-off",
        "fitter",
        "groups",
        "band today",
        "band adaptive",
        "median scale",
        "residuals (runs)",
    ]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if args.markdown else "  ".join(head))
    for b in blocks:
        cells = [
            b.collection,
            f"{b.cutoff:g}",
            b.fitter,
            str(b.n_groups),
            f"{b.coverage_today:.2f}",
            f"{b.coverage_adaptive:.2f}",
            f"{b.median_scale:.2f}",
            f"{b.median_sources:.1f}",
        ]
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))
    print()
    for f in cutoffs:
        for fitter in ("fast", "grid"):
            big = [b for b in blocks if b.cutoff == f and b.fitter == fitter and b.n_groups >= MIN_GROUPS]
            if not big:
                continue
            inside_today = sum(COVERAGE_GOAL[0] <= b.coverage_today <= COVERAGE_GOAL[1] for b in big)
            inside = sum(COVERAGE_GOAL[0] <= b.coverage_adaptive <= COVERAGE_GOAL[1] for b in big)
            dist_today = sum(abs(b.coverage_today - 0.8) for b in big) / len(big)
            dist = sum(abs(b.coverage_adaptive - 0.8) for b in big) / len(big)
            lo_t, hi_t = min(b.coverage_today for b in big), max(b.coverage_today for b in big)
            lo_a, hi_a = min(b.coverage_adaptive for b in big), max(b.coverage_adaptive for b in big)
            print(
                f"cut-off {f:g} {fitter}: band in 75-85% on {inside_today} -> {inside} of {len(big)} collections with"
                f" >= {MIN_GROUPS} groups; range {lo_t:.2f}-{hi_t:.2f} -> {lo_a:.2f}-{hi_a:.2f}; mean |coverage - 0.80|"
                f" {dist_today:.3f} -> {dist:.3f}"
            )
    print(
        f"# {len(cases)} cases, prior_strength {args.prior_strength:g}, min_reach {args.min_reach:g},"
        f" own residuals {'in' if args.include_own else 'out'},"
        f" {time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()
