"""Convert a public GRPO ablation study's exported curves into replayable grids (one CSV per run).

    python bench/make_public_grids.py SRC OUT

SRC is the ``grpo/results`` folder of github.com/garg-aayush/building-from-scratch (W&B exports, one long-format CSV
per ablation: ``run_name,metric,step,value``); OUT gets one folder per ablation, one ``<run>.csv`` per run with
``step,pass_rate`` (the exported ``eval/reward``, the validation accuracy on 1,024 MATH problems). A run that the
author plotted in several ablations (the reference configuration) is written once, in the first ablation folder that
holds it, so a leave-one-folder-out backtest never scores a curve with a prior that learned from a copy of it;
``ablations.json`` lists every ablation's runs (``{"grid": ["folder/run.csv", ...]}``) for the replay. A grid keeps
only the runs that reached its last step: the author stopped the others by hand, so their value at the budget is
unknown and no replay could score them. Nothing is edited; the values are the exported numbers.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

#: ablation folder and file under SRC -> grid name
ABLATIONS = {
    "baselines/baseline_ablation_data.csv": "baseline",
    "length_normalization/length_normalization_data.csv": "length_norm",
    "lr_sweep/lr_sweep_data.csv": "lr",
    "off_policy_sweep/off_policy_sweep_data.csv": "off_policy_50",
    "off_policy_full_sweep/off_policy_full_sweep_data.csv": "off_policy_200",
    "prompt_ablation/prompt_ablation_data.csv": "prompt",
    "sft_grpo/sft_grpo_data.csv": "sft_init",
    "std_dev/std_dev_normalization_data.csv": "std_norm",
}
METRIC = "eval/reward"


def read_runs(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Each run's (step, eval/reward) points in step order."""
    runs: dict[str, list[tuple[int, float]]] = defaultdict(list)
    with path.open() as f:
        for row in csv.DictReader(f):
            if row["metric"] == METRIC:
                runs[row["run_name"]].append((int(float(row["step"])), float(row["value"])))
    return {name: sorted(points) for name, points in runs.items()}


def write_run(path: Path, points: list[tuple[int, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "pass_rate"])
        w.writerows((s, repr(v)) for s, v in points)


def main(src: Path, out: Path) -> None:
    home: dict[str, tuple[str, list[tuple[int, float]]]] = {}
    ablations: dict[str, list[str]] = {}
    for rel, grid in ABLATIONS.items():
        runs = read_runs(src / rel)
        last = max(points[-1][0] for points in runs.values())
        for name, points in runs.items():
            if name in home and home[name][1] != points:
                raise SystemExit(f"{name}: two different curves under one name")
            complete = points[-1][0] == last
            status = "kept" if complete else f"left out (ends at step {points[-1][0]} < {last})"
            print(f"{grid}: {name}: {len(points)} points, last {points[-1]} -> {status}")
            if not complete:
                continue
            if name not in home:
                home[name] = (grid, points)
                write_run(out / grid / f"{name}.csv", points)
            ablations.setdefault(grid, []).append(f"{home[name][0]}/{name}.csv")
    (out / "ablations.json").write_text(json.dumps(ablations, indent=1) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
