"""A run's identity from the trainer's side, as a W&B user expects it: ``never``/``must`` raise at start, a second
live process under ``auto`` gets a run of its own, two offline runs that share a name stay two runs, and a trainer
killed with ``kill -9`` loses at most the point it was logging."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import ApiError, Client, Reporter
from tests.client.conftest import Service


def _sync(service: Service, folder: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sync", str(folder), "--url", service.url, "--token", service.token])
    return result.exit_code, result.output


def test_never_and_must_raise_at_start_with_the_reason(service: Service, tmp_path: Path) -> None:
    tmp_path = tmp_path / "offline"  # the service's database lives in the test's own tmp_path
    opts = {"url": service.url, "token": service.token, "offline_dir": tmp_path, "handle_signals": False}
    first = Reporter.start("exists", experiment="ident", **opts)
    first.log(1, 1.0, 0.1)
    with pytest.raises(ApiError) as never:
        Reporter.start("exists", experiment="ident", resume="never", **opts)
    assert never.value.status_code == 409 and "already has a run named 'exists'" in str(never.value)
    with pytest.raises(ApiError) as must:
        Reporter.start("absent", experiment="ident", resume="must", **opts)
    assert must.value.status_code == 404 and "no run named 'absent'" in str(must.value)
    assert first.finish()
    assert not tmp_path.exists() or not list(tmp_path.iterdir())  # refused starts leave nothing to sync


def test_a_second_live_process_under_auto_gets_its_own_run(service: Service, tmp_path: Path) -> None:
    opts = {"url": service.url, "token": service.token, "offline_dir": tmp_path, "handle_signals": False,
            "flush_interval": 0.05}  # fmt: skip
    first = Reporter.start("twin", experiment="ident", **opts)
    second = Reporter.start("twin", experiment="ident", **opts)
    assert second.name == "twin-2" and second.run_id != first.run_id
    for s in range(1, 6):
        first.log(s, float(s), 0.1)
        second.log(s, float(s), 0.2)
    assert second.finish()
    assert first.log(6, 6.0, 0.1) == "continue"  # the second's end does not stop the first
    assert first.finish()
    with Client(service.url, service.token) as api:
        assert api.run_info(int(first.run_id or 0)).status == "succeeded"
        assert api.run_info(int(second.run_id or 0)).n_points == 5


def test_two_offline_runs_that_share_a_name_sync_to_two_runs_once(service: Service, tmp_path: Path) -> None:
    tmp_path = tmp_path / "offline"
    for n in (10, 20):
        rep = Reporter.start("shared", experiment="ident", mode="offline", offline_dir=tmp_path,
                             handle_signals=False)  # fmt: skip
        for s in range(1, n + 1):
            rep.log(s, float(s), 0.01 * s)
        assert rep.finish()
    code, out = _sync(service, tmp_path)
    assert code == 0, out
    assert "10 points (10 stored, 0 already there), status succeeded" in out
    assert "20 points (20 stored, 0 already there), status succeeded" in out
    with Client(service.url, service.token) as api:
        exp = api.find_experiment("ident")
        assert exp is not None
        runs = {r.name: r for r in api.list_runs(int(exp["id"]))}
    assert sorted(runs) == ["shared", "shared-2"]
    assert sorted(r.n_points for r in runs.values()) == [10, 20]
    assert all(r.status == "succeeded" for r in runs.values())
    for folder in tmp_path.iterdir():  # synced twice: exactly once
        (folder / "synced.json").unlink()
    code, out = _sync(service, tmp_path)
    assert code == 0 and out.count("0 stored") == 2, out
    with Client(service.url, service.token) as api:
        assert len(api.list_runs(int(exp["id"]))) == 2


TRAINER = """
import sys, time
from scalerl.client import Reporter
rep = Reporter.start("killed-hard", url=sys.argv[1], token=sys.argv[2], experiment="ident", offline_dir=sys.argv[3],
                     flush_interval=2.0)
step = 0
while True:
    step += 1
    rep.log(step, float(step), min(1.0, 0.001 * step))
    print(step, flush=True)
    time.sleep(0.01)
"""


def test_kill_9_loses_at_most_the_point_being_logged(service: Service, tmp_path: Path) -> None:
    offline = tmp_path / "offline"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", TRAINER, service.url, service.token, str(offline)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    printed = 0
    deadline = time.monotonic() + 60
    while printed < 150 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip():
            printed = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert printed >= 150
    with Client(service.url, service.token) as api:
        run = api.find_run_by_name("killed-hard", "ident")
        assert run is not None
        before = run.n_points
    assert before < printed  # the last ~2 s had not left the buffer: the write-ahead folder has them
    code, out = _sync(service, offline)
    assert code == 0 and "status lost" in out, out
    with Client(service.url, service.token) as api:
        steps = [p["step"] for p in api.get_points(run.id)]
        assert api.run_info(run.id).status == "lost"
    assert steps[:printed] == list(range(1, printed + 1))  # every point log() returned for
    folder = next(offline.iterdir())
    assert json.loads((folder / "synced.json").read_text())["run_id"] == run.id
