"""Rebuild rl_core/scaling/fit/forecast_calibration.json and score it leave one collection out.

    python bench/forecast_cases.py --cutoffs 0.2,0.3,0.4,0.5,0.6       # fit every collection once (~2 min)
    python bench/build_forecast_calibration.py --version YYYY-MM-DD.N [--cases bench/out/forecast_cases.json]
                                               [--dry-run] [--markdown]

First every collection is scored with a calibration learned from the *other* collections only (never from itself):
per collection, cut-off (0.3, 0.5) and fitter (``fast`` per run, ``grid`` the service's joint fit), the median tail
MAE of the calibrated forecast, of the raw sigmoid (its posterior median) and of the two simple baselines (power law,
last value), and the coverage of the 80% band, calibrated and raw. Then the shipped calibration is learned from all
collections and written (unless ``--dry-run``). Bump --version when the cases or the method change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rl_core.scaling.fit.calibration import CALIBRATION_FILE
from rl_core.scaling.measure.calibration_learn import (
    COVERAGE_GOAL,
    TOLERANCE,
    learn_calibration,
    leave_one_collection_out,
)
from rl_core.scaling.measure.forecast_cases import ForecastCase

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=REPO / "bench" / "out" / "forecast_cases.json")
    ap.add_argument("--version", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if not args.cases.is_file():
        raise SystemExit(f"error: no cases at {args.cases}; run bench/forecast_cases.py first")
    raw = json.loads(args.cases.read_text())
    cases = [ForecastCase.from_json(c) for cs in raw["collections"].values() for c in cs]
    held, before, learned = leave_one_collection_out(cases)
    raw_by = {(b.collection, b.cutoff, b.fitter): b for b in before}
    head = [
        "collection",
        "cut-off",
        "fitter",
        "groups",
        "forecast",
        "sigmoid",
        "power law",
        "last value",
        "forecast / best",
        "band (raw → calibrated)",
    ]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if args.markdown else "  ".join(head))
    summary: dict[tuple[float, str], list[tuple[float, float, float, float, int]]] = {}
    for b in held:
        if b.cutoff not in (0.3, 0.5):
            continue
        r = raw_by[(b.collection, b.cutoff, b.fitter)]
        ratio = b.mae["forecast"] / b.best_baseline
        sig_ratio = r.mae["sigmoid"] / r.best_baseline
        cells = [
            b.collection,
            f"{b.cutoff:g}",
            b.fitter,
            str(b.n_groups),
            *(f"{b.mae[k]:.4f}" for k in ("forecast", "sigmoid", "power_law", "last")),
            f"{ratio:.2f}",
            f"{r.coverage['sigmoid']:.2f} → {b.coverage['forecast']:.2f}",
        ]
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))
        summary.setdefault((b.cutoff, b.fitter), []).append(
            (ratio, sig_ratio, r.coverage["sigmoid"], b.coverage["forecast"], b.n_groups)
        )
    print()
    for (cutoff, fitter), rows in sorted(summary.items()):
        ratios = np.array([r[0] for r in rows])
        sig = np.array([r[1] for r in rows])
        cov = np.array([r[3] for r in rows if r[4] >= 10])
        cov_raw = np.array([r[2] for r in rows if r[4] >= 10])
        inside = int(((cov >= COVERAGE_GOAL[0]) & (cov <= COVERAGE_GOAL[1])).sum())
        inside_raw = int(((cov_raw >= COVERAGE_GOAL[0]) & (cov_raw <= COVERAGE_GOAL[1])).sum())
        gm, gm_raw = np.exp(np.mean(np.log(ratios))), np.exp(np.mean(np.log(sig)))
        print(
            f"cut-off {cutoff:g} {fitter}: forecast / best baseline geometric mean {gm:.3f} (raw sigmoid {gm_raw:.3f});"
            f" within {TOLERANCE:g}x of it on {int((ratios <= TOLERANCE).sum())} of {ratios.size}"
            f" (raw {int((sig <= TOLERANCE).sum())}),"
            f" below it on {int((ratios < 1).sum())} (raw {int((sig < 1).sum())}); band in {COVERAGE_GOAL[0]}-"
            f"{COVERAGE_GOAL[1]} on {inside} of {cov.size} collections with >= 10 groups (raw {inside_raw})"
        )
    for name, cal in learned.items():
        kept = {k: cal[k] for k in ("weight_identified", "weight_unidentified", "scale")}
        print(f"# without {name}: {json.dumps(kept)}")
    cal = learn_calibration(cases, args.version)
    print(f"# shipped: {json.dumps(cal.to_json())}")
    if not args.dry_run:
        CALIBRATION_FILE.write_text(json.dumps(cal.to_json(), indent=1) + "\n")
        print(f"wrote {CALIBRATION_FILE}")


if __name__ == "__main__":
    main()
