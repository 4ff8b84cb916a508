"""Record ablation grids from this project's own engine (``scalerl train``) as CSV fixtures.

Each grid is a set of real training runs that share the base model (the demo's cached base checkpoint, seed 0),
the task (``configs/demo.yaml``: 1-3 digit additions, 2,000 training / 200 validation prompts), the evaluation
schedule (mean@k on all 200 validation prompts every ``eval_every`` steps) and the step budget; runs differ in one
recipe setting and the run seed. Runs execute one at a time (``scalerl train`` in a subprocess; the machine has
two cores), each in ``<runs>/<grid>/<run>/``; a run whose ``status.json`` exists is not run again, and a run killed
midway is resumed from its checkpoint, so the script can be restarted at any time.

Every run's ``metrics.jsonl`` becomes ``<out>/<grid>/<run>.csv`` with one row per evaluation step. The columns:
``step``, ``train_device_hours`` (the engine's cumulative training compute: generator + trainer busy hours,
evaluation excluded), ``train_flops``, ``pass_rate`` (validation mean@k), ``eval_truncation_rate``,
``train_pass_rate``, ``truncation_rate``, ``entropy``, ``staleness_mean``, ``reward_mean`` (the trainer's values on
the batch of that step; empty at step 0), ``train_pass_rate_window``, ``truncation_rate_window`` (the same averaged
over the steps since the previous evaluation), ``curriculum_retired`` and ``wall_seconds`` (the run's elapsed wall
clock, evaluation included). ``<out>/README.md`` is regenerated with a per-run table.

Usage: ``python bench/record_grids.py [--grid NAME ...] [--out tests/fixtures/engine_grids] [--runs DIR]``
(``--convert-only`` writes the CSVs and README from runs already recorded, training nothing).
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rl_core.contracts.points import MetricPoint, read_points
from rl_core.contracts.run_config import parse_run_config
from rl_core.engine.models import resolve_model_config

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "configs" / "demo.yaml"
SCALERL = Path(sys.executable).with_name("scalerl")
SEEDS = (0, 1)


@dataclass(frozen=True)
class Grid:
    """Runs sharing everything but ``variants`` (recipe overrides by dotted key) and the seed."""

    name: str
    description: str
    steps: int
    eval_every: int
    max_minutes: float
    variants: Mapping[str, Mapping[str, Any]]
    seeds: Sequence[int] = field(default=SEEDS)

    def runs(self) -> list[tuple[str, int, Mapping[str, Any]]]:
        return [(f"{v}_s{s}", s, ov) for v, ov in self.variants.items() for s in self.seeds]


GRIDS: dict[str, Grid] = {
    g.name: g
    for g in (
        Grid(
            name="loo",
            description="the demo recipe (ScaleRL) and three leave-one-out variants "
            "(rl_core.recipe.leave_one_out_overrides)",
            steps=500,
            eval_every=25,
            max_minutes=8,
            variants={
                "base": {},
                "loss_dapo": {"loss.type": "dapo"},
                "no_fp32_head": {"precision.fp32_lm_head": False},
                "no_zero_variance_filter": {"filters.zero_variance": "none"},
            },
        ),
        Grid(
            name="lr",
            description="learning-rate sweep of the demo recipe (optimizer.lr)",
            steps=800,
            eval_every=40,
            max_minutes=10,
            variants={f"lr{lr}": {"optimizer.lr": float(lr)} for lr in ("2e-5", "5e-5", "1e-4", "2e-4")},
        ),
        Grid(
            name="generations",
            description="generations per prompt (recipe.batch.generations) of the demo recipe, 16 prompts per batch",
            steps=400,
            eval_every=20,
            max_minutes=10,
            variants={f"gen{n}": {"batch.generations": n} for n in (4, 8, 12, 16)},
        ),
    )
}


def demo_config() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    return data


def base_model_path(runs: Path) -> Path:
    """The demo's base checkpoint for seed 0, built once into ``<runs>/base_cache``.

    The engine seeds the base checkpoint with the *run* seed, so runs with different seeds would start from
    different models; every run here loads this one checkpoint by path instead (for seed 0 that is exactly what
    ``base_checkpoint.enabled`` does)."""
    cfg = demo_config()
    cfg["seed"] = 0
    cfg["base_checkpoint"] = {**cfg["base_checkpoint"], "cache_dir": str(runs / "base_cache")}
    model = resolve_model_config(parse_run_config(cfg, source=str(DEMO)), log=print)
    assert model.path is not None
    return model.path


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = tree
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def run_config(grid: Grid, run: str, seed: int, overrides: Mapping[str, Any], model_path: Path) -> dict[str, Any]:
    cfg = copy.deepcopy(demo_config())
    cfg["name"] = f"{grid.name}-{run}"
    cfg["seed"] = seed
    cfg["model"] = {"path": str(model_path)}
    cfg.pop("base_checkpoint", None)
    for key, value in overrides.items():
        set_dotted(cfg["recipe"], key, value)
    cfg["budget"] = {"steps": grid.steps, "max_minutes": grid.max_minutes}
    cfg["eval"] = {**cfg["eval"], "every": grid.eval_every}
    cfg["checkpoint"] = {"every": 100, "keep": 1}
    cfg["sinks"] = {"console_every": grid.eval_every}
    parse_run_config(cfg, source=run)  # fail before training, not midway through a grid
    return cfg


def train(cfg: dict[str, Any], out: Path) -> str:
    """Run (or resume, or skip) one training; returns the final status."""
    status_file = out / "status.json"
    if status_file.exists():
        return str(json.loads(status_file.read_text())["status"])
    config_file = out.with_suffix(".yaml")
    config_file.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    cmd = [str(SCALERL), "train", str(config_file), "--out", str(out)]
    if (out / "checkpoints" / "latest").exists():
        cmd.append("--resume")
    elif out.exists():
        shutil.rmtree(out)  # killed before its first checkpoint: start over
    started = time.perf_counter()
    with out.with_suffix(".log").open("a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=False)
    status = json.loads(status_file.read_text())["status"] if status_file.exists() else "no status.json"
    print(f"{out.name}: {status} in {time.perf_counter() - started:.0f} s", flush=True)
    return str(status)


COLUMNS = (
    "step",
    "train_device_hours",
    "train_flops",
    "pass_rate",
    "eval_truncation_rate",
    "train_pass_rate",
    "truncation_rate",
    "entropy",
    "staleness_mean",
    "reward_mean",
    "train_pass_rate_window",
    "truncation_rate_window",
    "curriculum_retired",
    "wall_seconds",
)


def _fmt(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.6g}"


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else None


def eval_rows(points: Sequence[MetricPoint]) -> list[dict[str, str]]:
    """One row per evaluation point; train metrics of that step plus their mean since the previous evaluation."""
    rows: list[dict[str, str]] = []
    window: list[MetricPoint] = []
    for p in points:
        if p.step > 0:
            window.append(p)
        if p.pass_rate is None:
            continue
        m = p.metrics
        rows.append(
            {
                "step": str(p.step),
                "train_device_hours": _fmt(p.compute),
                "train_flops": _fmt(m.get("compute/flops")),
                "pass_rate": _fmt(p.pass_rate),
                "eval_truncation_rate": _fmt(m.get("eval/truncation_rate")),
                "train_pass_rate": _fmt(m.get("train/pass_rate")),
                "truncation_rate": _fmt(m.get("train/truncation_rate")),
                "entropy": _fmt(m.get("train/entropy")),
                "staleness_mean": _fmt(m.get("train/staleness_mean")),
                "reward_mean": _fmt(m.get("train/reward_mean")),
                "train_pass_rate_window": _fmt(_mean([w.metrics.get("train/pass_rate", math.nan) for w in window])),
                "truncation_rate_window": _fmt(
                    _mean([w.metrics.get("train/truncation_rate", math.nan) for w in window])
                ),
                "curriculum_retired": _fmt(m.get("curriculum/retired")),
                "wall_seconds": f"{p.wall_time:.1f}",
            }
        )
        window = []
    return rows


def write_csv(rows: Sequence[Mapping[str, str]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


README_HEAD = """# Engine ablation grids (real CPU training runs)

Recorded by `bench/record_grids.py` from this project's engine (`scalerl train`), for replaying early-stopping
policies and backtesting curve forecasts. Nothing here is simulated or edited: every CSV is the evaluation rows of one
run's `metrics.jsonl`, converted by the script.

Command: `.venv/bin/python bench/record_grids.py --grid {grids} --out tests/fixtures/engine_grids`
(run directories under `/work/grid_runs/`, not committed).
Machine: 2-core shared CPU VM, no GPU, torch 2.13.0+cpu, one torch thread per process, {date}; other agents' jobs ran
on the same cores, so `wall_seconds` and `train_device_hours` (busy time) carry load noise; `train_flops` does not.

Every run is `configs/demo.yaml` (tiny 0.1M-parameter Llama, ScaleRL recipe: PipelineRL-8, CISPO, prompt
aggregation, batch advantage normalisation, zero-variance filter, No-Positive-Resampling, interruption, FP32 head;
16 prompts x 8 generations, lr 1e-4) with these changes:
- the model is the demo's cached base checkpoint built with seed 0 (`model.path`), for every seed: the engine seeds
  the base checkpoint with the run seed, so without this the seed-1 runs would start from a different model;
- `budget.steps` and `eval.every` per grid (below), `budget.max_minutes` as a safety cap, `checkpoint.every: 100`;
- the one recipe override of the run's variant, and `seed` (0 or 1: sampler order, generation and evaluation seeds).
Evaluation: mean@4 at the recipe's temperature (1.0) on all 200 validation prompts, at step 0, every `eval.every`
steps and at the last step (identical within a grid).

Columns: `step`, `train_device_hours` (cumulative training compute, generator + trainer busy hours, evaluation
excluded), `train_flops`, `pass_rate` (validation mean@4), `eval_truncation_rate`; the trainer's values on that step's
batch: `train_pass_rate`, `truncation_rate` (share of truncated responses), `entropy`, `staleness_mean`,
`reward_mean` (empty at step 0); `train_pass_rate_window`, `truncation_rate_window` (means over the steps since the
previous evaluation); `curriculum_retired` (prompts retired by No-Positive-Resampling); `wall_seconds` (elapsed wall
clock of the run, evaluation included).

Per-run table: points = evaluation rows; final = mean of the last 3 evaluations; seconds = the run's wall clock.
"""


NOTES_MARKER = "<!-- notes: kept when the tables are regenerated -->"


def summary_table(grid: Grid, out: Path) -> list[str]:
    lines = [
        f"## `{grid.name}`: {grid.description}",
        "",
        f"{grid.steps} steps per run, evaluation every {grid.eval_every} steps.",
        "",
        "| run | override | seed | points | last step | first | final (mean of last 3) | best (step) "
        "| train device-h | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run, seed, overrides in grid.runs():
        path = out / grid.name / f"{run}.csv"
        if not path.exists():
            continue
        rows = read_csv(path)
        rates = [float(r["pass_rate"]) for r in rows]
        best = max(range(len(rates)), key=rates.__getitem__)
        final = sum(rates[-3:]) / len(rates[-3:])
        override = ", ".join(f"`{k}: {v}`" for k, v in overrides.items()) or "–"
        lines.append(
            f"| {run} | {override} | {seed} | {len(rows)} | {rows[-1]['step']} | {rates[0]:.3f} | {final:.3f} "
            f"| {rates[best]:.3f} ({rows[best]['step']}) | {float(rows[-1]['train_device_hours']):.4f} "
            f"| {float(rows[-1]['wall_seconds']):.0f} |"
        )
    return lines


def write_readme(out: Path, date: str) -> None:
    present = [g for g in GRIDS.values() if (out / g.name).is_dir()]
    text = README_HEAD.format(grids=" ".join(g.name for g in present), date=date)
    for grid in present:
        text += "\n" + "\n".join(summary_table(grid, out)) + "\n"
    readme = out / "README.md"
    if readme.exists():  # hand-written notes after the marker are kept
        old = readme.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            text += "\n" + NOTES_MARKER + old.split(NOTES_MARKER, 1)[1]
    readme.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--grid", nargs="*", choices=sorted(GRIDS), help="grids to record (default: all, in order)")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "engine_grids")
    parser.add_argument("--runs", type=Path, default=Path("/work/grid_runs"))
    parser.add_argument("--convert-only", action="store_true", help="write CSVs and README from existing runs")
    parser.add_argument("--date", default="2026-11-23", help="recording date written to the README")
    args = parser.parse_args()
    grids = [GRIDS[name] for name in (args.grid or GRIDS)]
    model_path = None if args.convert_only else base_model_path(args.runs)
    for grid in grids:
        for run, seed, overrides in grid.runs():
            out = args.runs / grid.name / run
            if model_path is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                train(run_config(grid, run, seed, overrides, model_path), out)
            points = read_points(out / "metrics.jsonl")
            if points:
                write_csv(eval_rows(points), args.out / grid.name / f"{run}.csv")
        write_readme(args.out, args.date)
        print(f"grid {grid.name}: CSVs in {args.out / grid.name}", flush=True)


if __name__ == "__main__":
    main()
