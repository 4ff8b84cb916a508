"""``scalerl up`` end to end: the embedded all-in-one (SQLite, the SQLAlchemy broker, server and workers as
processes) runs a grid; Ctrl-C stops everything cleanly and releases the unfinished run; a second ``scalerl up``
resumes it from its checkpoint and the curve has every step exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.processes import engine_pids
from tests.support.up import UP_MARKER
from tests.support.up import start_up as launch_up
from tests.worker.cluster import REPO, free_port, grid, wait_for, write_template

pytestmark = pytest.mark.slow
STEPS = 20


def start_up(env: dict[str, str], port: int) -> tuple[subprocess.Popen[str], list[str]]:
    proc, lines = launch_up(env, port, stop_grace=20, seconds=120)
    if not lines or UP_MARKER not in lines[-1]:
        proc.kill()
        raise AssertionError(f"scalerl up did not start: {lines}")
    return proc, lines


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    return proc.returncode, out


def test_up_runs_a_grid_and_the_next_up_resumes_the_unfinished_run(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    home.mkdir()
    env = {
        **os.environ,
        "SCALERL_HOME": str(home),
        "SCALERL_ENGINE_TEMPLATE": str(write_template(tmp_path / "template.yaml", STEPS)),
        "SCALERL_LEASE_SECONDS": "6",
        "SCALERL_HEARTBEAT_SECONDS": "1",
        "SCALERL_REAPER_INTERVAL_SECONDS": "1",
        "SCALERL_SUPERVISE_SECONDS": "0.5",
        "SCALERL_POLL_SECONDS": "0.2",
        "SCALERL_INTERVAL_REFIT": "false",
    }
    for key in ("SCALERL_DATABASE_URL", "SCALERL_BROKER_URL", "SCALERL_SERVER_URL", "SCALERL_TOKEN"):
        env.pop(key, None)
    proc, lines = start_up(env, port)
    url = f"http://127.0.0.1:{port}"
    assert f"scalerl is up at {url}" in lines and f"API token: {home / 'credentials.json'}" in lines
    second = subprocess.run(
        [sys.executable, "-m", "scalerl.cli", "up", "--port", str(free_port())],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 2 and "another `scalerl up` is running" in second.stderr
    headers = {"Authorization": f"Bearer {json.loads((home / 'credentials.json').read_text())['token']}"}
    try:
        created = httpx.post(f"{url}/api/v1/experiments", json=grid("embedded"), headers=headers, timeout=30)
        assert created.status_code == 201, created.text
        run_id = httpx.get(f"{url}/api/v1/runs", headers=headers).json()[0]["id"]

        def steps() -> list[int]:
            return [p["step"] for p in httpx.get(f"{url}/api/v1/runs/{run_id}/metrics", headers=headers).json()]

        wait_for(lambda: (s := steps()) and s[-1] >= 3, 120, "the run to report step 3")
    finally:
        code, out = interrupt(proc)
    assert code == 0, out
    assert not engine_pids(home / "runs", run_id)
    with httpx.Client() as client, pytest.raises(httpx.HTTPError):
        client.get(f"{url}/healthz", timeout=1)

    proc, lines = start_up(env, port)
    try:
        run = wait_for(
            lambda: (
                (r := httpx.get(f"{url}/api/v1/runs/{run_id}", headers=headers).json())["status"]
                in ("succeeded", "failed")
                and r
            ),
            150,
            "the resumed run to finish",
            interval=0.5,
        )
        assert run["status"] == "succeeded", (run, (home / "logs" / "worker-gpu.log").read_text()[-3000:])
        assert steps() == list(range(STEPS + 1))
        path = [(t["to_status"], t["actor"]) for t in run["transitions"]]
        assert path[2][0] == "lost" and "shut down" in run["transitions"][2]["reason"]
        assert ("queued", "supervisor") in path and run["attempts"] == 2
    finally:
        code, out = interrupt(proc)
    assert code == 0, out
