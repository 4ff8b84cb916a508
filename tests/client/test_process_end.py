"""A real training process that ends without ``finish()``: killed by SIGTERM (a preemption, a
scheduler's time limit), raising, or simply exiting. Every point it logged before the end is stored and the run's
final status is reported within seconds (it stayed ``running`` for ever)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalerl.client import Client
from tests.client.conftest import Service

pytestmark = pytest.mark.process

TRAINER = """
import sys, time
from scalerl.client import Reporter
rep = Reporter.start(sys.argv[3], url=sys.argv[1], token=sys.argv[2], experiment="ends",
                     flush_interval=60.0, batch_size=10_000)  # points stay buffered: the end must send them
rep.wait_for_run(30)
step = 0
while True:
    step += 1
    rep.log(step, float(step), min(1.0, 0.01 * step), loss=1.0 / step)
    print(step, flush=True)
    if sys.argv[4] == "raise" and step == 15:
        raise RuntimeError("CUDA error: an illegal memory access")
    if sys.argv[4] == "exit" and step == 15:
        sys.exit(0)
    time.sleep(0.02)
"""


def _start(service: Service, tmp_path: Path, name: str, how: str) -> subprocess.Popen[str]:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    return subprocess.Popen(
        [sys.executable, str(script), service.url, service.token, name, how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _last_logged(proc: subprocess.Popen[str], until: int) -> int:
    assert proc.stdout is not None
    last = 0
    for line in proc.stdout:
        last = int(line)
        if last >= until:
            break
    return last


def _run(service: Service, name: str) -> dict:  # type: ignore[type-arg]
    with Client(service.url, service.token) as api:
        found = api.find_run_by_name(name, "ends")
        assert found is not None
        return api.get_run(found.id)


def test_sigterm_flushes_every_point_and_reports_failed(service: Service, tmp_path: Path) -> None:
    proc = _start(service, tmp_path, "preempted", "loop")
    logged = _last_logged(proc, 40)
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    code = proc.wait(timeout=30)
    took = time.monotonic() - started
    assert code == -signal.SIGTERM, proc.stderr.read() if proc.stderr else ""  # it still ends as SIGTERM says
    run = _run(service, "preempted")
    assert run["status"] == "failed" and "SIGTERM" in run["status_reason"], run["status_reason"]
    assert run["n_points"] >= logged and run["last_step"] >= logged  # nothing logged before the signal was lost
    assert took < 15


def test_uncaught_exception_reports_failed_with_its_text(service: Service, tmp_path: Path) -> None:
    proc = _start(service, tmp_path, "raises", "raise")
    code = proc.wait(timeout=60)
    assert code == 1
    run = _run(service, "raises")
    assert run["status"] == "failed" and "illegal memory access" in run["status_reason"]
    assert run["n_points"] == 15


def test_plain_exit_without_finish_reports_succeeded(service: Service, tmp_path: Path) -> None:
    proc = _start(service, tmp_path, "forgot-finish", "exit")
    assert proc.wait(timeout=60) == 0
    run = _run(service, "forgot-finish")
    assert run["status"] == "succeeded" and run["n_points"] == 15
