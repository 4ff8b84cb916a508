"""Convert public RL ablation studies' exported curves into replayable grids (one CSV per run).

    python bench/make_public_grids.py garg SRC OUT        # github.com/garg-aayush/building-from-scratch
    python bench/make_public_grids.py deep-grpo SRC OUT   # github.com/befocuss/Deep-GRPO
    python bench/make_public_grids.py speed-rl SRC OUT    # github.com/rqzhangberkeley/DAPO (SPEED-RL)
    python bench/make_public_grids.py cs336-b SRC OUT     # github.com/ShibukiZero/assignment5-alignment
    python bench/make_public_grids.py soft-grpo SRC OUT   # github.com/zz1358m/SofT-GRPO-master
    python bench/make_public_grids.py cs336-olmo SRC OUT  # github.com/xiaofei9289/CS336_Project

Every study is written as OUT/<ablation>/<run>.csv plus OUT/ablations.json (``{"grid": ["folder/run.csv", ...]}``,
what ``bench/replay.py`` replays) and, where x is not the step or the runs do not share a base model, OUT/study.json
(``{"x": column, "y": column, "all": false}``).
A run that the author plotted in several ablations (a reference configuration) is written once, in the first
ablation folder that holds it, so a leave-one-folder-out backtest never scores a curve with a prior that learned
from a copy of it. Nothing is edited: the values are the exported numbers, written back as the same text.

- ``garg``: SRC is the ``grpo/results`` folder (W&B exports, one long-format CSV per ablation:
  ``run_name,metric,step,value``); ``step,pass_rate`` is the exported ``eval/reward``, the validation accuracy on
  1,024 MATH problems. A grid keeps only the runs that reached its last step: the author stopped the others by hand
  (most within the first 20% of the steps), so their value at the budget is unknown.
- ``deep-grpo``: SRC is ``recipe/DEEP_GRPO/paper_draw/data`` at commit 4e05c7de5b0f55973c2fd960ee29e5dfc3e44d7b
  (W&B UI exports, wide format: ``"Step","<run> - val-core/GSM8K/reward/mean@1",...__MIN,...__MAX``; the
  ``scale_budget`` export is indexed by relative time and carries each run's ``_step``). ``step,pass_rate`` is
  the accuracy on GSM8K's 1,319 test problems. Every run is kept: the runs end at ragged steps (none of them early
  in training), and a replay's budget is the last step common to a grid's runs.
- ``speed-rl``: SRC is the repository checkout (``metrics_summary/<run>/processed_metrics.json``, JSON lines of
  verl's validation records). Two studies are written, OUT_math500 and OUT_dapo1k (one per validation set:
  MATH500's 500 problems, and the repository's 1,000-problem DAPO-Math split), each with
  ``step,time_s,pass_rate`` (``time_s`` = ``accumulated_training_time``, the compute proxy the study compares
  by; a SPEED step costs less than a plain one) and x = ``time_s``. Every run is kept (the runs end at ragged
  times, as wall-clock budgets). The 1.5B Numina runs are two pairs with different evaluation settings (the RLOO
  pair and the DAPO pair start at different step-0 values on the same sampled evaluation), so they are two grids.
- ``cs336-b``: SRC is ``artifacts/experiments/main/ch7`` at commit 73a0f466e62717be93f7b6a2d0a216a504a96ff8 (the
  author's per-ablation ``*_eval_points.csv``); ``step,pass_rate`` is ``grpo_step,answer_accuracy``, the accuracy
  on 1,024 MATH validation problems. Runs the author marked ``stopped early`` or ``collapsed`` (the learning-rate
  sweep's, at step 50) are left out, as with ``garg``; the off-policy sweep is two grids, its 40-step screening
  phase (``broad``) and its 200-step ``focused`` phase. A curve plotted in several ablations (the reference run)
  is recognised by its values, whatever its name there, and written once.
- ``soft-grpo``: SRC is ``Results/training curves`` at commit 2b9d8ec6d8f022f2aefe7a1c2512dcb9924cddfe
  (TensorBoard event files, read with ``scalerl.integrations.readers``); ``step,pass_rate`` is
  ``val-core/math/reward/mean@1``, the accuracy on MATH-500, written as the float32 value the event file holds.
  One grid per base model folder; every run is kept (they end at ragged steps; a replay's budget is the last
  step common to a grid's runs).
- ``cs336-olmo``: SRC is ``assignment5/results`` at commits 67a18581e7660a1bc53ab2ef3d143cecec294b16 /
  48aa5ab7abcf2c398f075fd0ec90a2895b58c8f0 (``<recipe>_seed_<n>/metrics.jsonl``, one JSON record per training
  step; the evaluation records carry ``val_reward``), or a folder of transcripts ``<recipe>_seed_<n>.json``
  (``{"run", "commit", "total_chars", "points": [[step, "value as written"], ...]}``: every ``val_reward`` line
  of that file, in order, copied from the code index's pages where the repository could not be cloned). Both give
  the same CSVs. ``step,pass_rate`` is ``val_reward``, the accuracy on 1,024 GSM8K test problems (one sample at
  temperature 1). The evaluation at step -1 (``eval_at_start``, before the loop) is left out: the loop's own
  evaluation at step 0 measures the same untrained policy at the same compute. Runs are written as
  ``<recipe>_s<n>.csv`` so that the replay reads the seeds as replicates of one recipe.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

#: garg: ablation folder and file under SRC -> grid name
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


def garg(src: Path, out: Path) -> None:
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
                _write_text(out / grid / f"{name}.csv", ["step", "pass_rate"], [(str(s), repr(v)) for s, v in points])
            ablations.setdefault(grid, []).append(f"{home[name][0]}/{name}.csv")
    _write_manifest(out, ablations)


#: deep-grpo: export file under SRC -> grid name
DEEP_GRPO = {
    "loss_weight.csv": "loss_weight",
    "sampling_strategy.csv": "sampling_strategy",
    "grpo_scale_rollout.csv": "grpo_scale_rollout",
    "scale_budget.csv": "scale_budget",
}
DEEP_GRPO_METRIC = "val-core/GSM8K/reward/mean@1"


def read_wandb_wide(path: Path, metric: str) -> dict[str, list[tuple[str, str]]]:
    """Each run's (step, value) text pairs from a W&B UI export, in step order. An export indexed by time gives
    the step from the run's ``_step`` column of the same row; ``__MIN``/``__MAX`` must equal the value (a row that
    aggregates several steps would not be a measurement)."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    names = [c.removesuffix(f" - {metric}") for c in rows[0] if c.endswith(f" - {metric}")]
    runs: dict[str, list[tuple[str, str]]] = {}
    for name in names:
        col = f"{name} - {metric}"
        points = []
        for row in rows:
            if row[col] == "":
                continue
            if not (row[col + "__MIN"] == row[col] == row[col + "__MAX"]):
                raise SystemExit(f"{path.name}: {name}: an aggregated row (min/max differ from the value)")
            step = row["Step"] if "Step" in row else row[f"{name} - _step"]
            points.append((str(int(float(step))), row[col]))
        runs[name] = sorted(points, key=lambda p: int(p[0]))
    return runs


def deep_grpo(src: Path, out: Path) -> None:
    home: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    ablations: dict[str, list[str]] = {}
    for rel, grid in DEEP_GRPO.items():
        for name, points in read_wandb_wide(src / rel, DEEP_GRPO_METRIC).items():
            if name in home and home[name][1] != points:
                raise SystemExit(f"{name}: two different curves under one name")
            print(f"{grid}: {name}: {len(points)} points, last step {points[-1][0]}")
            if name not in home:
                home[name] = (grid, points)
                _write_text(out / grid / f"{name}.csv", ["step", "pass_rate"], points)
            ablations.setdefault(grid, []).append(f"{home[name][0]}/{name}.csv")
    _write_manifest(out, ablations)


#: speed-rl: grid -> its runs (``metrics_summary/<run>``), as the repository's plots group them
SPEED_RL = {
    "7b_dapo17k": [
        "7B-Math-RLOO-dataDAPO-N24",
        "7B-Math-FAST-RLOO-dataDAPO-N4+20",
        "7B-Math-GRPO-dataDAPO-N24",
        "7B-Math-FAST-GRPO-dataDAPO-N4+20",
        "7B-Math-DAPO-dataDAPO-N24",
        "7B-Math-FAST-DAPO-dataDAPO-N4+20",
    ],
    "7b_deepscaler": [
        "7B-Math-RLOO-DeepScaleR-N24",
        "7B-Math-FAST-RLOO-DeepScaleR-N4+20",
        "7B-Math-FAST-RLOO-DeepScaleR-N4+20-corrected-mini-bsz",
        "7B-Math-FAST-RLOO-DeepScaleR-N8+16-corrected-mini-bsz-gen32",
        "7B-Math-DAPO-DeepScaleR-N24",
        "7B-Math-FAST-DAPO-DeepScaleR-N4+20",
    ],
    "1p5b_dapo17k": [
        "1.5B-Math-RLOO-dataDAPO-N24",
        "1.5B-Math-FAST-RLOO-dataDAPO-N4+20",
        "1.5B-Math-FAST-RLOO-dataDAPO-N6+18",
        "1.5B-Math-FAST-RLOO-dataDAPO-N8+16",
    ],
    "1p5b_numina_rloo": ["1.5B-Math-RLOO-Numina-N24", "1.5B-Math-FAST-RLOO-Numina-N4+20"],
    "1p5b_numina_dapo": ["1.5B-Math-DAPO-NuminaMath-N24", "1.5B-Math-FAST-DAPO-NuminaMath-N4+20"],
}
SPEED_RL_METRICS = {
    "math500": "val-core/MATH500-Qwen-instruct/acc/mean@1",
    "dapo1k": "val-core/math_dapo-Qwen-instruct/acc/mean@1",
}


def _number_text(line: str, key: str) -> str:
    """The number after ``"key":`` in a JSON line, as written (json.loads would re-format it)."""
    m = re.search(r'"' + re.escape(key) + r'": (-?[0-9.eE+-]+)', line)
    if m is None:
        raise SystemExit(f"no {key} in a record")
    return m.group(1)


def speed_rl(src: Path, out: Path) -> None:
    for short, metric in SPEED_RL_METRICS.items():
        study = out.parent / f"{out.name}_{short}"
        ablations: dict[str, list[str]] = {}
        for grid, names in SPEED_RL.items():
            for name in names:
                lines = (src / "metrics_summary" / name / "processed_metrics.json").read_text().splitlines()
                points = []
                for line in lines:
                    if not line.strip():
                        continue
                    json.loads(line)  # a malformed record stops the conversion
                    points.append(
                        (
                            _number_text(line, "train_global_steps"),
                            _number_text(line, "accumulated_training_time"),
                            _number_text(line, metric),
                        )
                    )
                points.sort(key=lambda p: int(p[0]))
                print(f"{short}: {grid}: {name}: {len(points)} points, last step {points[-1][0]}")
                _write_text(study / grid / f"{name}.csv", ["step", "time_s", "pass_rate"], points)
                ablations.setdefault(grid, []).append(f"{grid}/{name}.csv")
        _write_manifest(study, ablations)
        (study / "study.json").write_text(json.dumps({"x": "time_s", "y": "pass_rate"}) + "\n")


def _write_manifest(study: Path, ablations: dict[str, list[str]]) -> None:
    """``study/ablations.json``: each grid's run files, relative to ``study``."""
    (study / "ablations.json").write_text(json.dumps(ablations, indent=1) + "\n")


def _write_text(path: Path, header: list[str], rows: list[tuple[str, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


#: cs336-b: ablation file under SRC -> grid name (the off-policy sweep is split by its ``phase`` column)
CS336_B = {
    "grpo_learning_rate/grpo_learning_rate_eval_points.csv": "lr",
    "grpo_off_policy_sweep/grpo_off_policy_eval_points.csv": "off_policy",
    "grpo_off_policy_clip_ablation/grpo_off_policy_clip_ablation_eval_points.csv": "clip",
    "grpo_length_normalization/grpo_length_normalization_eval_points.csv": "length_norm",
    "grpo_baselines/grpo_baselines_eval_points.csv": "baseline",
    "grpo_group_standard_deviation/grpo_group_standard_deviation_eval_points.csv": "std_norm",
    "grpo_prompt_ablation/grpo_prompt_ablation_eval_points.csv": "prompt",
    "sft_kl_grpo/sft_kl_grpo_eval_points.csv": "sft_kl",
}
#: cs336-b: the learning-rate sweep's ``status`` values of runs the author did not run to the end
CS336_B_LEFT_OUT = ("stopped early", "collapsed")


def file_name(name: str) -> str:
    """A run name as a file stem: characters other than letters, digits, ``.`` and ``-`` become ``_``."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9.\-]", "_", name)).strip("_")


def cs336_b(src: Path, out: Path) -> None:
    home: dict[tuple[tuple[int, float], ...], str] = {}  # a curve's (step, value) numbers -> its file under OUT
    ablations: dict[str, list[str]] = {}
    for rel, base in CS336_B.items():
        with (src / rel).open() as f:
            rows = list(csv.DictReader(f))
        runs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        status: dict[str, str] = {}
        for row in rows:
            name = row.get("run") or row["label"]
            grid = f"{base}_{row['phase']}" if "phase" in row else base
            runs[(grid, name)].append((row["grpo_step"], row["answer_accuracy"]))
            status[name] = row.get("status", "")
        for (grid, name), points in runs.items():
            points.sort(key=lambda p: int(p[0]))
            if status[name] in CS336_B_LEFT_OUT:
                print(f"{grid}: {name}: left out ({status[name]} at step {points[-1][0]})")
                continue
            key = tuple((int(step), float(value)) for step, value in points)  # files differ in decimals
            if key not in home:
                home[key] = f"{grid}/{file_name(name)}.csv"
                _write_text(out / home[key], ["step", "pass_rate"], list(points))
            print(f"{grid}: {name}: {len(points)} points, last step {points[-1][0]} -> {home[key]}")
            ablations.setdefault(grid, []).append(home[key])
    _write_manifest(out, ablations)


SOFT_GRPO_METRIC = "val-core/math/reward/mean@1"
#: soft-grpo: model folder under SRC -> grid name
SOFT_GRPO = {
    "tensorboard_show-1.5B": "r1distill_1p5b",
    "tensorboard_show-7B": "7b",
    "tensorboard_show-llama3B": "llama3b",
}


def soft_grpo(src: Path, out: Path) -> None:
    from scalerl.integrations.readers import read_tensorboard

    ablations: dict[str, list[str]] = {}
    for folder, grid in SOFT_GRPO.items():
        for name, history in sorted(read_tensorboard(src / folder).items()):
            points = [
                (str(step), repr(values[SOFT_GRPO_METRIC]))
                for step, values in sorted(history.items())
                if SOFT_GRPO_METRIC in values
            ]
            rel = f"{grid}/{file_name(name)}.csv"
            _write_text(out / rel, ["step", "pass_rate"], points)
            print(f"{grid}: {name}: {len(points)} points, last step {points[-1][0]} -> {rel}")
            ablations.setdefault(grid, []).append(rel)
    _write_manifest(out, ablations)
    # three base models: no "every run at the longest budget" grid across them
    (out / "study.json").write_text(json.dumps({"x": "step", "y": "pass_rate", "all": False}) + "\n")


#: cs336-olmo: grid -> the recipes (author's names) it compares; each recipe was run with seeds 0-3
CS336_OLMO = {
    "lr": ["lr_5e-6", "standard", "lr_3e-5"],
    "loss": ["standard", "grpo_constant", "dr_grpo", "maxrl", "rft"],
    "off_policy": ["standard", "offpolicy_clip", "offpolicy_noclip", "offpolicy_naive", "offpolicy_gspo"],
    "prompt": ["standard", "prompt_question_only", "prompt_r1_zero_three_shot"],
    # try_your_own is standard without the group's standard deviation in the advantage (its run_config.json)
    "std_norm": ["standard", "try_your_own"],
}
CS336_OLMO_SEEDS = range(4)


def _olmo_points(src: Path, run: str) -> list[tuple[str, str]]:
    """A run's (step, val_reward) text pairs: from its ``metrics.jsonl`` in a checkout, else from a transcript (in
    SRC or one folder below it)."""
    metrics = src / run / "metrics.jsonl"
    transcripts = [src / f"{run}.json", *sorted(src.glob(f"*/{run}.json"))]
    if metrics.is_file():
        points = []
        for line in metrics.read_text().splitlines():
            if '"val_reward"' in line:
                json.loads(line)  # a malformed record stops the conversion
                points.append((_number_text(line, "step"), _number_text(line, "val_reward")))
    else:
        found = next((t for t in transcripts if t.is_file()), None)
        if found is None:
            raise SystemExit(f"{run}: no {metrics} and no transcript {run}.json under {src}")
        points = [(str(step), value) for step, value in json.loads(found.read_text())["points"]]
    for step, value in points:
        if float(value) * 1024 != round(float(value) * 1024):  # a pass rate on 1,024 problems
            raise SystemExit(f"{run}: step {step}: {value} is not a multiple of 1/1024")
    return [(step, value) for step, value in points if int(step) >= 0]


def cs336_olmo(src: Path, out: Path) -> None:
    home: dict[str, str] = {}  # run -> its file under OUT (a recipe in several grids is written once)
    ablations: dict[str, list[str]] = {}
    for grid, recipes in CS336_OLMO.items():
        for recipe in recipes:
            for seed in CS336_OLMO_SEEDS:
                run = f"{recipe}_seed_{seed}"
                if run not in home:
                    points = _olmo_points(src, run)
                    home[run] = f"{grid}/{recipe}_s{seed}.csv"
                    _write_text(out / home[run], ["step", "pass_rate"], points)
                    print(f"{grid}: {run}: {len(points)} points, last step {points[-1][0]} -> {home[run]}")
                ablations.setdefault(grid, []).append(home[run])
    _write_manifest(out, ablations)


MAKERS = {
    "garg": garg,
    "deep-grpo": deep_grpo,
    "speed-rl": speed_rl,
    "cs336-b": cs336_b,
    "soft-grpo": soft_grpo,
    "cs336-olmo": cs336_olmo,
}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in MAKERS:
        raise SystemExit(__doc__)
    MAKERS[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]))
