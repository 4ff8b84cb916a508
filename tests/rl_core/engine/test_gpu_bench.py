"""``bench/gpu.py --smoke``: the GPU benchmark's code paths on the CPU (tiny models), end to end in a subprocess.

Checks that every required metric is measured for both model columns with a finite positive value, in the JSON
and in the Markdown table printed last, and that the output says the numbers are CPU numbers.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rl_core.generation.flops import matmul_params
from rl_core.models import ModelConfig, build_hf_config, char_tokenizer

REPO = Path(__file__).resolve().parents[3]


def _bench() -> ModuleType:
    """bench/gpu.py as a module (its table rows and required metrics), without touching sys.path."""
    spec = importlib.util.spec_from_file_location("scalerl_bench_gpu", REPO / "bench" / "gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _labels(gpu: Any) -> dict[str, str]:
    return {row.key: row.label for row in gpu.ROWS}


def _table_rows(stdout: str) -> dict[str, list[str]]:
    """label -> cells of the last Markdown table in the output."""
    lines = stdout.strip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("| metric |"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.timeout(600)
def test_smoke_run_measures_every_metric_on_the_cpu_and_says_so(tmp_path: Path) -> None:
    gpu = _bench()
    out = tmp_path / "smoke.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu.py"), "--smoke", "--json", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())

    meta = doc["meta"]
    assert meta["measured_on"] == "cpu" and meta["smoke"] is True
    assert meta["columns"] == ["0.5B", "1.5B"]
    assert meta["date"] and meta["torch"]

    problems = []
    for metric in gpu.REQUIRED:
        columns = ["0.5B"] if metric.startswith("engine_") else ["0.5B", "1.5B"]
        for col in columns:
            value = doc["metrics"].get(metric, {}).get(col)
            if value is None or not math.isfinite(value) or value <= 0:
                problems.append(f"{metric}[{col}] = {value} (skipped: {doc['skipped'].get(metric)})")
    assert not problems, problems

    # Optional rows: either measured (finite, positive) or skipped with a reason.
    for metric in ("sync_collective_s", "train_tokens_s_zero1", "train_tokens_s_zero2", "train_tokens_s_zero3"):
        values = doc["metrics"].get(metric)
        if values:
            assert all(math.isfinite(v) and v > 0 for v in values.values()), (metric, values)
        else:
            assert doc["skipped"].get(metric), f"{metric}: neither measured nor skipped with a reason"

    # The table printed last has a row per required metric with a number in every column it applies to.
    stdout = proc.stdout
    assert "CPU smoke check" in stdout and "none is a GPU measurement" in stdout
    rows = _table_rows(stdout)
    labels = _labels(gpu)
    for metric in gpu.REQUIRED:
        cells = rows.get(labels[metric])
        assert cells is not None, f"no table row for {metric}"
        columns = cells[:1] if metric.startswith("engine_") else cells[:2]
        for cell in columns:
            number = float(cell.rstrip("%").replace(",", ""))
            assert math.isfinite(number) and number > 0, (metric, cells)
    header = next(line for line in stdout.splitlines() if line.startswith("| metric |"))
    assert header.count("[CPU]") == 2
    assert "device: CPU" in stdout


def test_merge_of_split_runs_gives_one_table(tmp_path: Path) -> None:
    gpu = _bench()

    def doc(col: str, preset: str, value: float) -> dict[str, object]:
        return {
            "meta": {
                "columns": [col],
                "presets": {col: preset},
                "measured_on": "cuda",
                "device_name": "GPU",
                "torch": "t",
                "cuda": "c",
                "transformers": "x",
                "deepspeed": "not installed",
                "date": "2026-11-21",
                "mode": "GPU measurement",
            },
            "metrics": {"train_mfu": {col: value}},
            "skipped": {},
            "details": {},
        }

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(doc("1.5B", "qwen2-1.5b", 0.45)))
    b.write_text(json.dumps(doc("0.5B", "qwen2-0.5b", 0.30)))
    res = gpu.merge([str(a), str(b)])
    assert res.meta["columns"] == ["0.5B", "1.5B"]
    rows = _table_rows(gpu.table(res))
    mfu = rows[_labels(gpu)["train_mfu"]]
    assert mfu[:2] == ["30.0%", "45.0%"]
    assert mfu[-1] == "yes (1.5B)"


def test_qwen2_1_5b_preset_has_the_shape_of_qwen2_1_5b() -> None:
    cfg = build_hf_config(ModelConfig(preset="qwen2-1.5b"), char_tokenizer())
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers) == (1536, 8960, 28)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.vocab_size) == (12, 2, 151_936)
    assert cfg.tie_word_embeddings and cfg.max_position_embeddings == 32_768
    rope = getattr(cfg, "rope_theta", None) or cfg.rope_parameters["rope_theta"]  # transformers 4.x / 5.x
    assert rope == 1_000_000.0
    # 1.54B matmul weights (the tied 233M-parameter head counted once, as a matmul).
    assert 1.53e9 < matmul_params(cfg) < 1.56e9


def test_gpu_session_script_dry_run_installs_nothing_runs_its_stages_and_logs(tmp_path: Path) -> None:
    """``bench/gpu_session.sh`` (one command per GPU lease) dry-run on the CPU: the CUDA tests are collected and
    skipped with their reason, the profiler runs in smoke mode, every stage is logged with its exit code; an
    unknown stage fails the script."""
    env = {
        **os.environ,
        "GPU_SESSION_DRY": "1",
        "OUT": str(tmp_path),
        "PY": sys.executable,
        "PROFILE_ARGS": "--only decode",
        "OMP_NUM_THREADS": "1",
    }
    script = str(REPO / "bench" / "gpu_session.sh")
    proc = subprocess.run(["bash", script, "tests", "profile"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (tmp_path / "session.log").read_text()
    assert "tests: exit 0" in log and "profile: exit 0" in log
    assert "needs a CUDA GPU" in log  # the skip reason of tests/cuda, printed by -rs
    junit = (tmp_path / "cuda-tests.xml").read_text()
    assert 'skipped="' in junit and 'failures="0"' in junit
    assert (tmp_path / "profile_decode.txt").is_file()
    assert "decode tiny batch 1" in log and "not GPU numbers" in log
    bad = subprocess.run(["bash", script, "nope"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown stage nope" in bad.stdout


@pytest.mark.timeout(600)
def test_the_lease_session_fits_one_ten_minute_lease_and_its_new_stages_run_dry(tmp_path: Path) -> None:
    """``bash bench/gpu_session.sh lease``: the stages that measure the GPU engine's goals, every one with a limit,
    the limits together under 10 minutes; the two new stages run dry on the CPU (the CUDA tests skip, the head bench
    at smoke sizes)."""
    env = {**os.environ, "GPU_SESSION_DRY": "1", "OUT": str(tmp_path), "PY": sys.executable, "OMP_NUM_THREADS": "1"}
    script = str(REPO / "bench" / "gpu_session.sh")
    plan = subprocess.run(
        ["bash", script, "lease"], env={**env, "GPU_SESSION_PLAN": "1"}, capture_output=True, text=True, timeout=60
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    stages = plan.stdout.splitlines()[0].removeprefix("stages: ").split()
    assert stages == ["env", "cuda_head", "head_cuda", "train05", "train15", "side"]
    limits = {line.split()[1]: line.split()[2] for line in plan.stdout.splitlines() if line.startswith("limit ")}
    assert set(limits) == set(stages) and all(v.isdigit() for v in limits.values()), limits
    assert sum(int(v) for v in limits.values()) <= 600
    dry = {**env, "LIMIT_head_cuda": "400"}  # the GPU's 40 s limit is too short for the CPU's emulated bf16x6
    proc = subprocess.run(
        ["bash", script, "cuda_head", "head_cuda"], env=dry, capture_output=True, text=True, timeout=500
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (tmp_path / "session.log").read_text()
    assert "cuda_head: exit 0" in log and "head_cuda: exit 0" in log and "needs a CUDA GPU" in log
    head = json.loads((tmp_path / "head_cuda.json").read_text())
    assert all(b["bf16x6"]["max"] <= 1e-5 for b in head["sampled_batches"])
