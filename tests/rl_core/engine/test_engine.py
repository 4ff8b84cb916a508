"""End-to-end runs of the engine on a tiny model: modes, staleness, metrics, checkpoints, failures, resume."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rl_core.contracts.points import read_points
from rl_core.contracts.run_config import parse_run_config
from rl_core.contracts.run_dir import latest_checkpoint
from rl_core.engine.runner import run
from tests.support.tiny_run import tiny_config

REPO = Path(__file__).resolve().parents[3]


def _run(cfg: dict[str, Any], out: Path) -> Any:
    return run(parse_run_config(cfg), out)


@pytest.mark.parametrize(
    ("mode", "k", "bound"),
    [("pipeline", 2, 2), ("sync", 1, 0), ("ppo_off_policy", 2, 1)],
)
def test_modes_run_end_to_end_with_bounded_staleness(tmp_path: Path, mode: str, k: int, bound: int) -> None:
    cfg = tiny_config(**{"recipe.pipeline": {"mode": mode, "k": k}})
    result = _run(cfg, tmp_path)
    assert result.status == "succeeded", result.reason
    points = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in points] == [0, 1, 2, 3, 4]
    assert [p.pass_rate is not None for p in points] == [True, False, True, False, True]
    computes = [p.compute for p in points]
    assert computes == sorted(computes) and computes[-1] > 0
    for p in points[1:]:
        m = p.metrics
        assert m["train/staleness_max"] <= bound
        assert m["compute/device_hours"] == pytest.approx(
            m["compute/generator_device_hours"] + m["compute/trainer_device_hours"]
        )
        assert m["compute/flops"] > 0 and "train/entropy" in m and "train/ratio_mean" in m
    assert points[-1].metrics["compute/eval_device_hours"] > 0
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "succeeded"
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000004"
    assert (tmp_path / "metrics.csv").is_file()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
def test_deepspeed_backend_runs_the_engine(tmp_path: Path) -> None:
    cfg = tiny_config(
        **{"trainer": {"backend": "deepspeed", "zero_stage": 2, "micro_batch_size": 1}, "budget.steps": 2}
    )
    result = _run(cfg, tmp_path)
    assert result.status == "succeeded", result.reason
    assert [p.step for p in read_points(tmp_path / "metrics.jsonl")] == [0, 1, 2]
    assert (tmp_path / "checkpoints" / "step_000002" / "deepspeed").is_dir()


def test_non_finite_loss_fails_with_a_clear_status(tmp_path: Path) -> None:
    cfg = tiny_config(**{"recipe.optimizer": {"lr": 1e30, "max_grad_norm": None}, "budget.steps": 6})
    result = _run(cfg, tmp_path)
    assert result.status == "failed"
    assert "diverged" in result.reason and "non-finite" in result.reason
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "failed" and status["reason"] == result.reason


def test_fresh_run_refuses_a_used_directory_and_resume_needs_a_checkpoint(tmp_path: Path) -> None:
    cfg = parse_run_config(tiny_config(**{"budget.steps": 1}))
    assert run(cfg, tmp_path / "a").status == "succeeded"
    with pytest.raises(ValueError, match="already holds a run"):
        run(cfg, tmp_path / "a")
    with pytest.raises(FileNotFoundError):
        run(cfg, tmp_path / "b", resume=True)
    other_seed = parse_run_config(tiny_config(**{"budget.steps": 1, "seed": 3}))
    with pytest.raises(ValueError, match="seed differ"):
        run(other_seed, tmp_path / "a", resume=True)
    extended = parse_run_config(tiny_config(**{"budget.steps": 2}))  # a budget may grow on resume
    assert run(extended, tmp_path / "a", resume=True).status == "succeeded"
    assert [p.step for p in read_points(tmp_path / "a" / "metrics.jsonl")] == [0, 1, 2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scalerl.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_cli_bad_config_and_missing_file(tmp_path: Path) -> None:
    missing = _cli("train", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: config file")
    bad = tiny_config(**{"budget.steps": 0, "recipe.loss.type": "sgd"})
    bad["unknown_key"] = 1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    res = _cli("train", str(path), "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert res.stderr.startswith("error: invalid run config")
    assert len(res.stderr.strip().splitlines()) == 1  # one line, every problem named
    for key in ("budget.steps", "unknown_key", "loss.type"):
        assert key in res.stderr
    no_model = tiny_config(model={"path": str(tmp_path / "no-model")})
    path.write_text(yaml.safe_dump(no_model))
    res = _cli("train", str(path), "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and res.stderr.startswith("error: missing file: model.path")


@pytest.mark.slow
def test_kill_and_resume_continues_the_curve_without_duplicates(tmp_path: Path) -> None:
    cfg = tiny_config(**{"budget.steps": 24, "checkpoint.every": 3, "eval.every": 3, "sinks.console": True})
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalerl.cli", "train", str(path), "--out", str(out)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        points = read_points(out / "metrics.jsonl")
        if points and points[-1].step >= 8:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its generator, mid-run
    proc.wait(10)
    before = read_points(out / "metrics.jsonl")
    assert 8 <= before[-1].step < 24
    # The kill can land between writing a step's metrics and its checkpoint: the resume restarts from the newest
    # complete checkpoint at the time of the kill, and every point up to it must be unchanged.
    at_kill = latest_checkpoint(out / "checkpoints")
    assert at_kill is not None
    ckpt = int(at_kill.name.removeprefix("step_"))
    assert ckpt <= before[-1].step
    res = _cli("train", str(path), "--out", str(out), "--resume")
    assert res.returncode == 0, res.stderr
    points = read_points(out / "metrics.jsonl")
    assert [p.step for p in points] == list(range(25))  # every step once: nothing duplicated, nothing missing
    assert [p.to_json() for p in points[: ckpt + 1]] == [p.to_json() for p in before[: ckpt + 1]]
    computes = [p.compute for p in points]
    assert computes == sorted(computes)
    steps = [b - a for a, b in itertools.pairwise(computes)]
    typical = sorted(steps)[len(steps) // 2]
    assert steps[ckpt] < 10 * typical  # no jump in compute where the run resumed
    assert json.loads((out / "status.json").read_text())["status"] == "succeeded"


def test_a_run_whose_prompts_are_all_retired_ends_as_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No-Positive-Resampling retiring every prompt is the end of the task's data, not a failure: the batches
    already issued are used, the run checkpoints its last step and reports why it ended early."""
    from rl_core.engine import sampler

    original = sampler.PromptSampler.next_batch
    calls = {"n": 0}

    def next_batch(self: sampler.PromptSampler, n: int) -> list[str]:
        calls["n"] += 1
        if calls["n"] > 5:  # as if the curriculum retired the last prompt after five batches
            raise sampler.PromptsExhausted("every training prompt was retired by No-Positive-Resampling")
        return original(self, n)

    monkeypatch.setattr(sampler.PromptSampler, "next_batch", next_batch)
    result = _run(tiny_config(**{"budget.steps": 10}), tmp_path)
    assert result.status == "succeeded", result.reason
    assert "training data exhausted after step 5" in result.reason and result.step == 5
    assert [p.step for p in read_points(tmp_path / "metrics.jsonl")] == [0, 1, 2, 3, 4, 5]
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000005"  # checkpoint.every is 2
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "succeeded"
