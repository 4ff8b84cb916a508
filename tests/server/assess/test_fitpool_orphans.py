"""A ``kill -9`` of the server leaves no fit worker or resource tracker running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

SCRIPT = """
import numpy as np
from server.assess.fitpool import FitPool
from server.assess.forecasting import Curve
from server.lifecycle.grid import FitSpec
pool = FitPool(1)
c = np.linspace(100, 8000, 20)
pool.full_fit(Curve(c, 0.3 + 0.4 * c / (c + 2500)), FitSpec())
print("ready", flush=True)
import time
time.sleep(600)
"""


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie; a process that ends between the two checks is not alive (no race)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.process
def test_fit_workers_end_when_the_server_is_killed() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2  # the fit worker and multiprocessing's resource tracker
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(c) for c in children):
        time.sleep(0.2)
    alive = [c.pid for c in children if _alive(c)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not alive, f"orphans after kill -9: {alive}"
