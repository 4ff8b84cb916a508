"""Which demo grid has arms that differ for real: every arm run to its full budget, no stops, several seeds.

Each arm is the demo config's recipe (``configs/demo.yaml``) with overrides; every run starts from the demo's
cached base model and trains for ``--budget`` device-hours (on the CPU: the processes' CPU time) exactly as a
worker would run it (the demo config minus the per-run keys is the engine template). A run's final value is what
the verdict observes: the mean of its last two evaluations. The table gives each arm's mean over seeds, the
standard error over seeds, and the evaluation noise of one final value (binomial, the validation prompts x k).

    python bench/demo_grid.py --grid lr --seeds 0 1 2 --json bench/experiments/demo_grid_lr.json
    python bench/demo_grid.py --grid leave-one-out --seeds 0

The grid is kept for the demo only if its best arm beats the runner-up by more than the noise and the others span a
visible range (docs/benchmarks.md, "The demo's grid").
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rl_core.contracts.points import read_points  # noqa: E402
from rl_core.contracts.run_config import parse_run_config  # noqa: E402
from rl_core.engine.runner import run  # noqa: E402
from server.lifecycle import demo_grid  # noqa: E402


def run_arm(config: dict[str, Any], recipe: dict[str, Any], seed: int, budget: float) -> dict[str, Any]:
    """One arm's run to the end of its budget, as the worker builds it (the full recipe replaces the config's)."""
    cfg = copy.deepcopy(config)
    cfg["recipe"] = recipe
    cfg["seed"] = seed
    cfg["name"] = f"demo-grid-{seed}"
    cfg["budget"] = {"steps": 100_000, "max_device_hours": budget}
    cfg.setdefault("sinks", {})["console"] = False
    out = Path(tempfile.mkdtemp(prefix="demo-grid-")) / "run"
    started = time.monotonic()
    result = run(parse_run_config(cfg), out)
    points = read_points(out / "metrics.jsonl")
    evals = [(p.compute, p.pass_rate) for p in points if p.pass_rate is not None]
    final = statistics.mean(v for _, v in evals[-2:])
    return {
        "seed": seed,
        "status": result.status,
        "steps": result.step,
        "wall_s": time.monotonic() - started,
        "compute": points[-1].compute,
        "final": final,
        "curve": evals,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    ap.add_argument("--grid", default="lr", choices=sorted(demo_grid.DEMO_GRIDS))
    ap.add_argument("--lrs", type=float, nargs="*", default=None, help="the lr grid at these learning rates instead")
    ap.add_argument("--arms", nargs="*", default=None, help="only these arms (names)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--budget", type=float, default=None, help="device-hours per run (default: the grid's)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    config = yaml.safe_load(args.config.read_text())
    if args.lrs:
        lr = dataclasses.replace(demo_grid.DEMO_GRIDS["lr"], axes={"optimizer.lr": args.lrs})
        demo_grid.DEMO_GRIDS["lr"] = lr
    grid = demo_grid.DEMO_GRIDS[args.grid]
    budget = args.budget or grid.budget
    arms = [(n, r) for n, r in demo_grid.grid_arms(config, args.grid) if args.arms is None or n in args.arms]
    eval_n = int(config["task"].get("validation_size", 200)) * int(config["eval"].get("k", 1))
    rows: dict[str, list[dict[str, Any]]] = {}
    for seed in args.seeds:
        for name, recipe in arms:
            r = run_arm(config, recipe, seed, budget)
            rows.setdefault(name, []).append(r)
            print(
                f"{name} seed {seed}: {r['status']} {r['steps']} steps, final {r['final']:.3f}, {r['wall_s']:.0f} s",
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps({"grid": args.grid, "budget": budget, "runs": rows}, indent=1))
    print(f"\n{args.grid} grid, {budget} device-hours per run, seeds {args.seeds}, {time.strftime('%Y-%m-%d')}")
    print("| arm | finals | mean | SE over seeds | eval noise (1 final) | steps |")
    print("|---|---|---|---|---|---|")
    for name, runs in sorted(rows.items(), key=lambda kv: -statistics.mean(r["final"] for r in kv[1])):
        finals = [r["final"] for r in runs]
        m = statistics.mean(finals)
        se = statistics.stdev(finals) / math.sqrt(len(finals)) if len(finals) > 1 else float("nan")
        noise = math.sqrt(max(m * (1 - m), 1e-6) / (2 * eval_n))  # mean of two evaluations
        steps = statistics.mean(r["steps"] for r in runs)
        print(f"| {name} | {', '.join(f'{f:.3f}' for f in finals)} | {m:.3f} | {se:.3f} | {noise:.3f} | {steps:.0f} |")


if __name__ == "__main__":
    main()
