"""A run's engine log for the dashboard: the tail of ``<runs_dir>/run-<id>/engine.log``, bounded, with
the last traceback marked; nothing outside ``runs_dir`` is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.lifecycle.runlogs import LogUnavailable, error_lines, read_tail
from tests.server.conftest import Service
from tests.server.helpers import sweep_doc

CRASH = """\
step 10 loss 0.52
step 20 loss 0.48
Traceback (most recent call last):
  File "/app/rl_core/engine/runner.py", line 88, in run
    trainer.step()
  File "/app/rl_core/engine/trainer.py", line 12, in step
    raise RuntimeError("CUDA error: device-side assert triggered")
RuntimeError: CUDA error: device-side assert triggered
engine exited with code 1
"""


def _run_id(service: Service) -> int:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    return int(exp["runs"][0]["id"])


def _write_log(runs_dir: Path, run_id: int, text: str) -> Path:
    folder = runs_dir / f"run-{run_id}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "engine.log"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_tail_of_a_failed_runs_log_with_its_traceback_marked(service: Service) -> None:
    run_id = _run_id(service)
    runs_dir = service.ctx.settings.runs_dir
    assert runs_dir is not None and runs_dir == service.ctx.settings.home / "runs"
    _write_log(runs_dir, run_id, CRASH)
    out = service.client.get(f"/api/v1/dashboard/runs/{run_id}/log", headers=service.read).json()
    assert out["available"] is True and out["truncated"] is False and out["size"] == len(CRASH.encode())
    assert out["lines"] == CRASH.splitlines()
    assert out["error_lines"] == [2, 3, 4, 5, 6, 7]  # the traceback, from its header to the exception line


def test_only_the_requested_tail_is_read(service: Service) -> None:
    run_id = _run_id(service)
    assert service.ctx.settings.runs_dir is not None
    body = "".join(f"line {i:06d}\n" for i in range(50_000))  # 600 kB
    _write_log(service.ctx.settings.runs_dir, run_id, body)
    out = service.client.get(
        f"/api/v1/dashboard/runs/{run_id}/log", params={"tail_bytes": 1200}, headers=service.read
    ).json()
    assert out["truncated"] is True and out["size"] == len(body)
    assert out["lines"][-1] == "line 049999" and len(out["lines"]) == 99  # 100 lines of 12 bytes, the first cut
    too_big = service.client.get(
        f"/api/v1/dashboard/runs/{run_id}/log", params={"tail_bytes": 10**9}, headers=service.read
    )
    assert too_big.status_code == 422 and "tail_bytes" in too_big.text


def test_missing_unknown_and_escaping_logs(service: Service, tmp_path: Path) -> None:
    run_id = _run_id(service)
    runs_dir = service.ctx.settings.runs_dir
    assert runs_dir is not None
    missing = service.client.get(f"/api/v1/dashboard/runs/{run_id}/log", headers=service.read).json()
    assert missing["available"] is False and "SCALERL_RUNS_DIR" in missing["reason"] and missing["lines"] == []
    assert service.client.get("/api/v1/dashboard/runs/999999/log", headers=service.read).status_code == 404
    assert service.client.get("/api/v1/dashboard/runs/..%2F..%2Fetc/log", headers=service.read).status_code in (
        404,
        422,
    )
    assert service.client.get(f"/api/v1/dashboard/runs/{run_id}/log").status_code == 401
    # A run directory that is a symlink to a folder outside runs_dir is not followed.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "engine.log").write_text("secret\n", encoding="utf-8")
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / f"run-{run_id}").symlink_to(outside, target_is_directory=True)
    escaped = service.client.get(f"/api/v1/dashboard/runs/{run_id}/log", headers=service.read).json()
    assert escaped["available"] is False and escaped["lines"] == [] and "secret" not in str(escaped)


def test_a_log_that_is_a_symlink_or_not_a_file_is_not_read(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    (runs / "run-1").mkdir(parents=True)
    (runs / "run-1" / "engine.log").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "elsewhere.txt").write_text("x\n", encoding="utf-8")
    (runs / "run-2" / "engine.log").mkdir(parents=True)
    for run_id in (1, 2, 3):
        with pytest.raises(LogUnavailable, match="no engine log"):
            read_tail(runs, run_id, 1000)


def test_error_lines_mark_errors_but_not_ordinary_lines() -> None:
    lines = ["loading model", "warning: slow tokenizer", "ValueError: bad shape", "step 1", "error: engine died"]
    assert error_lines(lines) == [2, 4]
