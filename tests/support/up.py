"""``scalerl up`` (the server and its workers) as a child process of a test, in a process group of its own."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The line ``scalerl up`` prints once the server and its workers are up.
UP_MARKER = "Ctrl-C stops everything"


def start_up(
    env: dict[str, str], port: int, *, stop_grace: int, seconds: float
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``scalerl up --port PORT`` in a new session (its own process group, as ``make demo`` in a terminal has)
    and read its output until it prints ``UP_MARKER``, ends, or ``seconds`` pass. Returns the process (left running
    unless it ended) and the lines read, stripped; it is up exactly when ``UP_MARKER`` is in the last line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalerl.cli", "up", "--port", str(port), "--stop-grace", str(stop_grace)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if UP_MARKER in line:
            break
    return proc, lines
