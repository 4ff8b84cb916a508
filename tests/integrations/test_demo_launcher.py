"""The demo's launcher (`scalerl up`, which `scalerl demo` runs) on a busy machine. A port in
use is one clear line naming it and how to choose another, before anything starts (it printed a traceback, then
"scalerl is up" about the *other* server, then "server exited with code 3"); the saved credentials follow the port
actually used; SIGTERM or SIGHUP to the launcher's process group (twice, as `make` passes it on) stops every child,
as Ctrl-C does (they kept serving, reparented to PID 1)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.up import UP_MARKER, start_up
from tests.worker.cluster import REPO, free_port


def env_for(home: Path) -> dict[str, str]:
    env = {**os.environ, "SCALERL_HOME": str(home)}
    for key in ("SCALERL_DATABASE_URL", "SCALERL_BROKER_URL", "SCALERL_SERVER_URL", "SCALERL_TOKEN", "SCALERL_PORT"):
        env.pop(key, None)
    return env


@pytest.mark.parametrize("command", ["up", "demo"])
def test_a_port_in_use_is_one_clear_line(tmp_path: Path, command: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "scalerl.cli", command, "--port", str(port)],
            cwd=REPO,
            env=env_for(tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use (another scalerl, or another program); choose another with "
        "--port N or SCALERL_PORT=N"
    ]
    assert "is up" not in done.stdout and "Traceback" not in done.stderr


def test_credentials_follow_the_port_actually_used(tmp_path: Path) -> None:
    from server.runtime.bootstrap import read_credentials, write_credentials
    from server.store.settings import Settings
    from worker.embedded import sync_credentials

    home = tmp_path / "home"
    write_credentials(home / "credentials.json", "http://127.0.0.1:8765", "secret-token")
    settings = Settings(home=home, port=9123, host="127.0.0.1")  # type: ignore[call-arg]
    sync_credentials(settings)
    assert read_credentials(home) == {"url": "http://127.0.0.1:9123", "token": "secret-token"}
    assert (home / "credentials.json").stat().st_mode & 0o777 == 0o600


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.process
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_process_group_stops_every_child(tmp_path: Path, sig: signal.Signals) -> None:
    proc, lines = start_up(env_for(tmp_path / "home"), free_port(), stop_grace=5, seconds=150)
    children = descendants(proc.pid)
    try:
        assert lines and UP_MARKER in lines[-1], lines
        assert len(children) >= 3, children  # the server and two workers
        os.killpg(proc.pid, sig)
        time.sleep(0.05)
        proc.send_signal(sig)  # `make` passes the signal on: a second one must not break off the stopping
        out, _ = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in descendants(proc.pid) | children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    left = [pid for pid in children if alive(pid)]
    assert not left, (left, out)
    assert proc.returncode == 0 and "Aborted" not in out and "Traceback" not in out, out
