"""How far could choosing between forecasters go? The backtest summary of an oracle that picks, per case, the best of
some methods after seeing the held-out tail: a bound for any selection or evidence weighting between them.

Run: .venv/bin/scalerl backtest ../shared/curves --grids --json > /tmp/bt.json
     .venv/bin/python bench/backtest_oracle.py /tmp/bt.json [--pick grid,power_law]
Prints, per subset and cut-off, the median tail MAE (medians over near-duplicate groups, as the backtest) of each
picked method and of the per-case oracle over them.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path, help="output of `scalerl backtest ... --json`")
    ap.add_argument("--pick", default="grid,power_law")
    args = ap.parse_args()
    data = json.loads(args.report.read_text())
    picked = args.pick.split(",")
    curves = {c["name"]: c for c in data["curves"]}
    cases: dict[tuple[str, float], dict[str, float | None]] = defaultdict(dict)
    for case in data["cases"]:
        cases[(case["curve"], case["cutoff"])][case["method"]] = case["tail_mae"]
    all_methods = sorted({m for v in cases.values() for m in v})
    for subset in ("informative", "all"):
        for cutoff in sorted({k[1] for k in cases}):
            per_group: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            for (name, f), maes in cases.items():
                if f != cutoff or (subset == "informative" and curves[name]["saturated"]):
                    continue
                if any(maes.get(m) is None for m in all_methods):
                    continue  # the backtest's pairing: every method forecast this case
                group = per_group[curves[name]["group"]]
                for m in picked:
                    group[m].append(float(maes[m]))  # type: ignore[arg-type]
                group["oracle"].append(min(float(maes[m]) for m in picked))  # type: ignore[arg-type]
            cells = [f"{m}={np.median([np.mean(g[m]) for g in per_group.values()]):.4f}" for m in [*picked, "oracle"]]
            print(f"{subset:12s} {cutoff:4.2f} groups={len(per_group):3d} " + " ".join(cells))


if __name__ == "__main__":
    main()
