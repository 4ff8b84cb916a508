"""A trainer's own SIGTERM handler (the usual preemption pattern: the handler sets a flag, the loop logs, saves a
checkpoint and exits 0) runs as if scalerl were not there: the client records the signal, calls the handler and
finishes nothing, so a ``log()`` after the signal is stored and the run ends ``stopped`` when the process exits.
Real trainer processes against a live service, the handler installed before and after ``Reporter.start``; without a
handler the signal still ends the process with 143 and the run ``failed`` (tests/client/test_process_end.py)."""

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
import signal, sys, time
from pathlib import Path
from scalerl.client import Reporter

url, token, name, how, ckpt, sig = sys.argv[1:7]
SIG = getattr(signal, sig)
flag = []


def on_term(signum, frame):  # the usual preemption handler: note it, the loop saves and exits
    flag.append(signum)


def chained(signum, frame):  # installed after the reporter, calling the handler it replaced (as Lightning does)
    flag.append(signum)
    if callable(replaced):
        replaced(signum, frame)


if how in ("before", "before-finish"):
    signal.signal(SIG, on_term)
if how == "ignore":
    signal.signal(SIG, signal.SIG_IGN)
rep = Reporter.start(name, url=url, token=token, experiment="signals",
                     flush_interval=60.0, batch_size=10_000)  # points stay buffered: the end must send them
rep.wait_for_run(30)
if how == "after":
    signal.signal(SIG, on_term)
if how == "chained":
    replaced = signal.signal(SIG, chained)
step = 0
while True:
    step += 1
    rep.log(step, float(step), min(1.0, 0.01 * step), loss=1.0 / step)
    print(step, flush=True)
    if flag or (how == "ignore" and Path(ckpt + ".go").exists()):
        step += 1
        rep.log(step, float(step), 0.5, after_signal=1.0)  # one more point after the signal
        Path(ckpt).write_text(str(step))  # the checkpoint
        print("saved", step, flush=True)
        if how == "before-finish":
            rep.finish()  # the script ends its run itself: still a preemption
        sys.exit(0)
    time.sleep(0.02)
"""


def _start(service: Service, tmp_path: Path, name: str, how: str, sig: str = "SIGTERM") -> subprocess.Popen[str]:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    return subprocess.Popen(
        [sys.executable, str(script), service.url, service.token, name, how, str(tmp_path / "ckpt"), sig],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(proc: subprocess.Popen[str], step: int) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if int(line) >= step:
            return
    raise AssertionError(proc.stderr.read() if proc.stderr else "the trainer ended early")


def _run(service: Service, name: str) -> tuple[dict, list[dict]]:  # type: ignore[type-arg]
    with Client(service.url, service.token) as api:
        found = api.find_run_by_name(name, "signals")
        assert found is not None
        with service.http() as http:
            points = http.get(f"/api/v1/runs/{found.id}/metrics").json()
        return api.get_run(found.id), points


def _preempt(service: Service, tmp_path: Path, name: str, how: str, sig: str = "SIGTERM") -> None:
    proc = _start(service, tmp_path, name, how, sig)
    _until(proc, 20)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err  # the trainer's handler decided: it saved and exited 0
    saved = int(out.split("saved")[1])
    assert (tmp_path / "ckpt").read_text() == str(saved)
    assert "this reporter has finished" not in err
    run, points = _run(service, name)
    assert run["status"] == "stopped", run["status_reason"]
    assert sig in run["status_reason"] and "preempted" in run["status_reason"], run["status_reason"]
    assert [p["step"] for p in points] == list(range(1, saved + 1))  # every point, the one after the signal too
    assert points[-1]["metrics"]["after_signal"] == 1.0


def test_a_handler_installed_before_the_reporter_saves_and_exits_0(service: Service, tmp_path: Path) -> None:
    _preempt(service, tmp_path, "handler-before", "before")


def test_a_handler_installed_after_the_reporter_saves_and_exits_0(service: Service, tmp_path: Path) -> None:
    # The handler replaced the client's: the next log() puts the client's back in front of it.
    _preempt(service, tmp_path, "handler-after", "after")


def test_a_handler_installed_after_that_calls_the_replaced_one(service: Service, tmp_path: Path) -> None:
    # The client's handler, called back as "the previous handler", must not end the process (it had no handler
    # of the trainer's to call when it was installed: SIG_DFL).
    _preempt(service, tmp_path, "handler-chained", "chained")


def test_a_script_that_finishes_its_run_after_the_signal_ends_it_stopped(service: Service, tmp_path: Path) -> None:
    _preempt(service, tmp_path, "handler-finish", "before-finish")


def test_sighup_with_a_handler_is_chained_too(service: Service, tmp_path: Path) -> None:
    _preempt(service, tmp_path, "handler-sighup", "before", "SIGHUP")


def test_an_ignored_signal_changes_nothing(service: Service, tmp_path: Path) -> None:
    proc = _start(service, tmp_path, "ignores", "ignore")
    _until(proc, 20)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert proc.poll() is None  # SIG_IGN: still training
    (tmp_path / "ckpt.go").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    run, points = _run(service, "ignores")
    assert run["status"] == "succeeded", run["status_reason"]  # not taken for a preemption
    assert [p["step"] for p in points] == list(range(1, int(out.split("saved")[1]) + 1))


KEEP_CHAINED = """
import os, signal, sys
from scalerl.client import Reporter, exits

rep = Reporter.start("offline", mode="offline", offline_dir=sys.argv[1])
ours = signal.getsignal(signal.SIGTERM)
calls = []
signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))  # the trainer's, after ours
exits.keep_chained()
now = signal.getsignal(signal.SIGTERM)
assert now is not ours and type(now) is type(ours), now  # ours again, in front of the trainer's
exits.keep_chained()
assert signal.getsignal(signal.SIGTERM) is now  # wrapped once
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # set on purpose: left alone
exits.keep_chained()
assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
signal.signal(signal.SIGTERM, now)
assert exits.received() is None
os.kill(os.getpid(), signal.SIGTERM)
assert calls == [signal.SIGTERM] and exits.received().name == "SIGTERM", calls
rep.log(1, 1.0, 0.5)  # not finished
print("ok")
"""


def test_keep_chained_wraps_a_later_handler_once(tmp_path: Path) -> None:
    script = tmp_path / "keep.py"
    script.write_text(KEEP_CHAINED)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "offline")], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.endswith("ok\n"), proc.stderr
