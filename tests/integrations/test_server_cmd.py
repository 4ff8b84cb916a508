"""`scalerl server` on a busy port saved its new token with the other server's URL (the next command
got a 401 with no hint), and SIGHUP ended it without a graceful shutdown (leaked semaphores)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(home: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "SCALERL_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "scalerl.cli", "server", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_healthy(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not come up")


def test_busy_port_is_refused_before_any_token_is_saved_and_sighup_is_graceful(tmp_path: Path) -> None:
    port = _free_port()
    first = _server(tmp_path / "a", port)
    try:
        _wait_healthy(port)
        second = _server(tmp_path / "b", port)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 2, (out, err)
        assert f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err and "Traceback" not in err
        assert not (tmp_path / "b" / "credentials.json").exists()  # no token saved with another server's URL
    finally:
        first.send_signal(signal.SIGHUP)
        _, err = first.communicate(timeout=30)
    # Shut down as for SIGTERM (uvicorn re-raises it once done), not killed by the hang-up itself (-1).
    assert first.returncode in (0, -signal.SIGTERM), err
    assert "Application shutdown complete" in err and "Finished server process" in err
    assert "leaked semaphore" not in err
