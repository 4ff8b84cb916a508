"""Data-parallel DeepSpeed ranks: row shards, a 2-rank group equal to one torch trainer, an engine run on 2 ranks.

Each multi-rank check runs in a fresh interpreter: torch.distributed's default group is per process and other
tests in this process already initialised a one-rank group."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rl_core.engine.trainer_deepspeed import Ranks, shard
from rl_core.engine.trainer_group import rank_device
from tests.support.tiny_run import tiny_config

REPO = Path(__file__).resolve().parents[3]
needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")


@pytest.mark.parametrize(("rows", "world"), [(9, 2), (3, 4), (8, 8), (1, 3), (10, 3)])
def test_shards_cover_every_row_once_and_differ_by_at_most_one(rows: int, world: int) -> None:
    parts = [shard(rows, Ranks(rank=r, world_size=world)) for r in range(world)]
    covered = [i for p in parts for i in range(p.start, p.stop)]
    assert covered == list(range(rows))
    sizes = [p.stop - p.start for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_rank_devices_count_up_from_the_run_device() -> None:
    assert [str(rank_device("cuda:1", r)) for r in range(3)] == ["cuda:1", "cuda:2", "cuda:3"]
    assert str(rank_device("cuda", 1)) == "cuda:1" and str(rank_device("cpu", 5)) == "cpu"


@pytest.mark.slow
@needs_deepspeed
@pytest.mark.parametrize("stage", [1, 3])
def test_two_ranks_take_the_same_step_as_one_torch_trainer(stage: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.rl_core.engine.dp_check", str(stage)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    res = json.loads(lines[0].removeprefix("RESULT "))
    for ref_loss, group_loss, ref_tokens, group_tokens in res["losses"]:
        assert group_loss == pytest.approx(ref_loss, rel=1e-4, abs=1e-6)  # statistics summed over the ranks
        assert group_tokens == ref_tokens
    assert res["moved"] > 1e-4  # the steps changed the weights...
    assert res["weight_diff"] < 1e-5  # ...exactly as one trainer on the whole batch (rows 5 + 4, one pad pass)
    assert res["stream_diff"] == 0.0 and res["keys_equal"]  # the sync stream gathers the same full weights
    assert res["reload_diff"] == 0.0 and res["version"] == [2, 2]  # sharded checkpoint round trip


@pytest.mark.slow
@needs_deepspeed
def test_the_engine_trains_on_two_zero3_ranks(tmp_path: Path) -> None:
    cfg = tiny_config(
        **{"trainer": {"backend": "deepspeed", "zero_stage": 3, "ranks": 2, "micro_batch_size": 1}, "budget.steps": 3}
    )
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    code = (
        "import sys, pathlib; from rl_core.contracts.run_config import load_run_config; "
        "from rl_core.engine.runner import run; "
        "r = run(load_run_config(sys.argv[1]), pathlib.Path(sys.argv[2])); print('STATUS', r.status, r.reason)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "STATUS succeeded" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    points = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [p["step"] for p in points] == [0, 1, 2, 3]
    assert all(p["metrics"]["train/staleness_max"] <= 2 for p in points[1:])  # updates reached the generator
    assert (tmp_path / "out" / "checkpoints" / "step_000003" / "deepspeed").is_dir()
