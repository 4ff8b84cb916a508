"""Presets and the leave-one-out grid on the demo task: every variant trained with the same budget.

Each variant is ``configs/demo.yaml`` with its recipe replaced by a preset (``scalerl``, ``deepseek-grpo``,
``qwen-dapo``, ``magistral``, ``minimax``) or a leave-one-out variant of ScaleRL (``rl_core.recipe.leave_one_out``,
extended), keeping the demo's sizes (batch, lengths, learning rate, precision). Runs are sequential (one engine at a
time on this 2-core machine). Reported per variant: validation pass rate at the start and the end (mean@k), the best
evaluation, training samples/s, mean staleness, truncation rate, and the status.

Usage: ``python bench/engine_recipes.py [--steps 120] [--only scalerl,loo-loss-dapo] [--out DIR]``.
Prints a Markdown table last; each run's metrics stay under ``--out``.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import yaml

from rl_core.contracts.points import read_points
from rl_core.contracts.run_config import parse_run_config
from rl_core.engine.runner import run
from rl_core.recipe import PRESET_OVERRIDES, leave_one_out_overrides

REPO = Path(__file__).resolve().parents[1]
#: The demo's size-related recipe keys, kept for every variant.
SIZES = ("batch", "precision", "optimizer", "schedule", "length", "sampling")


def variants() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {name: dict(ov) for name, ov in PRESET_OVERRIDES.items()}
    for name, ov in leave_one_out_overrides(extended=True).items():
        out[name] = dict(ov)
    return out


def variant_config(base: dict[str, Any], overrides: dict[str, Any], steps: int) -> dict[str, Any]:
    cfg = copy.deepcopy(base)
    recipe = {k: v for k, v in cfg["recipe"].items() if k in SIZES}
    recipe["preset"] = "scalerl"
    for key, value in overrides.items():
        section, _, leaf = key.partition(".")
        node = recipe.setdefault(section, {})
        for part in leaf.split(".")[:-1]:
            node = node.setdefault(part, {})
        node[leaf.split(".")[-1]] = value
    cfg["recipe"] = recipe
    cfg["budget"] = {"steps": steps}
    cfg["eval"] = {**cfg["eval"], "every": max(1, steps // 5)}
    cfg["checkpoint"] = {"every": steps}
    cfg["sinks"] = {"console": False}
    return cfg


def summarise(out: Path) -> dict[str, float]:
    points = read_points(out / "metrics.jsonl")
    evals = [p for p in points if p.pass_rate is not None]
    train = [p for p in points if p.step > 0]
    n = max(1, len(train))
    return {
        "start": evals[0].pass_rate or 0.0,
        "end": evals[-1].pass_rate or 0.0,
        "best": max(p.pass_rate or 0.0 for p in evals),
        "samples_per_s": train[-1].metrics.get("throughput/samples_per_s", 0.0) if train else 0.0,
        "staleness": sum(p.metrics.get("train/staleness_mean", 0.0) for p in train) / n,
        "truncation": sum(p.metrics.get("train/truncation_rate", 0.0) for p in train) / n,
        "device_hours": points[-1].compute,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "recipes")
    args = parser.parse_args()
    base = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    chosen = variants()
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    rows = []
    for name, overrides in chosen.items():
        cfg = parse_run_config(variant_config(base, overrides, args.steps))
        out = args.out / name
        result = run(cfg, out)
        summary = summarise(out) if (out / "metrics.jsonl").exists() else {}
        print(f"{name}: {result.status} {summary}", flush=True)
        rows.append((name, result.status, summary))
    print("| variant | status | pass rate start → end (best) | samples/s | staleness | truncation | device-h |")
    print("|---|---|---|---|---|---|---|")
    for name, status, s in rows:
        if not s:
            print(f"| {name} | {status} | – | – | – | – | – |")
            continue
        print(
            f"| {name} | {status} | {s['start']:.3f} → {s['end']:.3f} ({s['best']:.3f}) | {s['samples_per_s']:.0f} "
            f"| {s['staleness']:.2f} | {s['truncation']:.3f} | {s['device_hours']:.4f} |"
        )


if __name__ == "__main__":
    main()
