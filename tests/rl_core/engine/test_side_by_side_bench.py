"""The engine benches on the CPU at smoke sizes, end to end in subprocesses: ``bench/engine_side_by_side.py``
(scalerl pipeline and sync, TRL when it is installed) and ``bench/static_decode.py`` (dynamic and static eager)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import child_env

REPO = Path(__file__).resolve().parents[3]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = child_env(PYTHONPATH=str(REPO), TQDM_DISABLE="1")
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=280, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.timeout(300)
def test_side_by_side_smoke_prints_every_system_with_its_limit(tmp_path: Path) -> None:
    systems = "pipeline,sync" + (",trl" if importlib.util.find_spec("trl") else "")
    out = tmp_path / "side.json"
    proc = _run(["bench/engine_side_by_side.py", "--smoke", "--systems", systems, "--json", str(out)])
    results = json.loads(out.read_text())["results"]
    assert set(results) == set(systems.split(","))
    for name, r in results.items():
        assert "error" not in r, (name, r)
        assert r["step_s"] > 0 and r["tokens_s"] > 0 and 0 < r["limit_s"] < r["step_s"], (name, r)
    assert "| scalerl PipelineRL-8 |" in proc.stdout and "× limit" in proc.stdout
    # On the CPU nothing shares a GPU: PipelineRL-8 runs as asked (engine/schedule.py picks sync on a shared GPU).
    assert results["pipeline"]["schedule_used"] == "pipeline k=8" and results["sync"]["schedule_used"] == "sync k=1"


@pytest.mark.process
@pytest.mark.timeout(300)
def test_static_decode_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "decode.json"
    args = ["--device", "cpu", "--preset", "tiny", "--batch", "4", "--tokens", "8", "--modes", "dynamic,eager"]
    _run(["bench/static_decode.py", *args, "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["mode"] for r in rows] == ["dynamic", "eager"]
    assert all(math.isfinite(r["ms_per_step"]) and r["tokens_per_s"] > 0 for r in rows)
