"""`scalerl submit --wait` and `scalerl wait` as a CI job sees them: the wait rides out a real server
restart and 503s (honouring Retry-After), gives up with exit 5 on a service that stays unreachable, and every end
has its own exit code (scalerl/cli/exit_codes.py): decided, undecided (low confidence), timed out, auth, bad input.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from rl_core.engine.ports import free_port
from scalerl.cli.exit_codes import (
    EXIT_AUTH,
    EXIT_BAD_INPUT,
    EXIT_CONDITION,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNDECIDED,
    EXIT_UNREACHABLE,
)
from scalerl.cli.main import cli
from scalerl.cli.waiting import Patient, Progress, Unreachable
from scalerl.client.api import ServiceUnavailable
from tests.client.conftest import Service, build_context, write_token
from tests.server.helpers import curve_points, sweep_doc
from tests.server.live import live_server
from tests.support.http import Reply, Request, json_reply, local_service


def wait(url: str, token: str, *args: str, home: Path | None = None) -> Result:
    env = {"SCALERL_HOME": str(home or Path("/nonexistent")), "SCALERL_URL": "", "SCALERL_TOKEN": ""}
    return CliRunner().invoke(cli, ["wait", *args, "--url", url, "--token", token], env=env)


def create(http: httpx.Client, name: str) -> tuple[int, list[dict[str, Any]]]:
    exp = http.post("/api/v1/experiments", json=sweep_doc(name=name))
    assert exp.status_code == 201, exp.text
    runs = http.get("/api/v1/runs", params={"experiment_id": exp.json()["id"]}).json()
    return int(exp.json()["id"]), runs


def report(http: httpx.Client, runs: list[dict[str, Any]], ceilings: tuple[float, float]) -> None:
    for run, a in zip(runs, ceilings, strict=True):
        r = http.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": curve_points(A=a, n=40, seed=run["id"])})
        assert r.status_code == 200, r.text


def test_wait_rides_out_a_server_restart_and_ends_decided(tmp_path: Path) -> None:
    ctx = build_context(tmp_path)
    token = write_token(ctx)
    port = free_port()
    headers = {"Authorization": f"Bearer {token}"}
    with live_server(ctx, port) as url, httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        exp_id, runs = create(http, "restart")
    done = threading.Event()

    ctx.engine.dispose()
    restarted = build_context(tmp_path)  # a new server process on the same database and port

    def comes_back() -> None:  # the service is down while `scalerl wait` starts, then restarts and the runs report
        time.sleep(1.5)
        with live_server(restarted, port), httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            report(http, runs, (0.66, 0.46))
            done.wait(60)

    t = threading.Thread(target=comes_back, daemon=True)
    t.start()
    started = time.monotonic()
    r = wait(url, token, str(exp_id), "--poll", "0.2", "--retry-for", "30", "--timeout", "60")
    done.set()
    t.join(15)
    restarted.engine.dispose()
    assert r.exit_code == EXIT_OK, r.output
    assert time.monotonic() - started >= 1.0
    assert "service unavailable" in r.stderr and "retry 1 in 1 s" in r.stderr
    assert "the service answers again" in r.stderr
    assert f"dashboard: {url}/experiments/{exp_id}" in r.stdout
    assert "verdict (decided): best=batch.prompts=32,seed=0" in r.stdout


def test_a_service_that_stays_unreachable_exits_5_after_the_retry_window() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    r = wait(url, "srl_x", "3", "--retry-for", "2.5", "--poll", "0.1")
    elapsed = time.monotonic() - started
    assert r.exit_code == EXIT_UNREACHABLE, r.output
    assert 2.5 <= elapsed < 15
    # back-off 1 s, then 2 s cut to what is left of the window (less on a loaded machine, where a try takes longer)
    waits = [float(w) for w in re.findall(r"retry \d+ in ([\d.]+) s", r.stderr)]
    assert len(waits) >= 2 and waits[0] <= 1.0 and all(w <= 2.0 for w in waits), r.stderr
    assert sum(waits) <= 2.5 + 1e-9, r.stderr  # the waits end at the window
    assert r.stderr.splitlines()[-1].startswith(f"error: cannot reach the server at {url}: ")
    assert "re-attach with `scalerl wait 3`" in r.stderr
    quick = wait(url, "srl_x", "3", "--retry-for", "0")
    assert quick.exit_code == EXIT_UNREACHABLE and "retry" not in quick.stderr


@contextmanager
def busy_then(verdict: dict[str, Any], retry_after: str) -> Iterator[tuple[str, list[float]]]:
    """A service that answers one 503 (``Retry-After``) and then ``verdict``; yields its URL and request times."""
    seen: list[float] = []

    def answer(_: Request) -> Reply:
        seen.append(time.monotonic())
        if len(seen) == 1:
            return json_reply(503, {"detail": "database unavailable"}, {"Retry-After": retry_after})
        return json_reply(200, verdict)

    with local_service(answer) as url:
        yield url, seen


#: The issue's demo: the best run named with P = 0.37, every run finished. The service says undecided.
LOW_CONFIDENCE = {
    "experiment_id": 7,
    "decided": False,
    "best_run_id": 3,
    "best_run_name": "lr=3e-6",
    "runner_up_id": 1,
    "runner_up_name": "lr=1e-6",
    "basis": "forecast",
    "difference_at_budget": 0.004,
    "confidence": 0.37,
    "reason": "lr=3e-6 forecasts 0.621 at the budget vs lr=1e-6's 0.617; P(higher at the budget) = 0.37 < 0.9",
    "finished": True,
    "ranking": [],
}


def test_503_retry_after_is_honoured_and_a_low_confidence_verdict_exits_undecided() -> None:
    with busy_then(LOW_CONFIDENCE, "2.5") as (url, seen):
        r = wait(url, "srl_x", "7", "--poll", "0.1")
    assert r.exit_code == EXIT_UNDECIDED == 4, r.output
    assert "the service answered 503" in r.stderr and "retry 1 in 2.5 s" in r.stderr
    assert seen[1] - seen[0] >= 2.4  # Retry-After, not the 1 s back-off
    assert "verdict (not decided): best=lr=3e-6" in r.stdout
    assert "undecided: every run finished and the verdict is not decided" in r.stderr
    with busy_then(LOW_CONFIDENCE, "0") as (url, _):
        gated = wait(url, "srl_x", "7", "--poll", "0.1", "--fail-if", "best!=lr=3e-6")
    assert gated.exit_code == EXIT_UNDECIDED  # the named best of an undecided verdict passes no gate by itself


def test_low_confidence_on_a_live_grid_is_not_decided(service: Service, tmp_path: Path) -> None:
    with service.http() as http:
        exp_id, runs = create(http, "tie")
        report(http, runs, (0.66, 0.66))  # the same ceiling: P(best ends higher) is far from 0.9
        verdict = http.get(f"/api/v1/experiments/{exp_id}/verdict").json()
        assert not verdict["decided"] and not verdict["finished"]
        r = wait(service.url, service.token, "tie", "--poll", "0.3", "--timeout", "1.5")
        assert r.exit_code == EXIT_TIMEOUT, r.output
        assert "timed out without a decision; re-attach with `scalerl wait" in r.stderr
        assert "] waiting: " in r.stderr  # progress
        failing = wait(service.url, service.token, str(exp_id), "--timeout", "0.5", "--fail-if", "undecided")
        assert failing.exit_code == EXIT_CONDITION and "fail-if: undecided" in failing.stderr
        for run in runs:
            done = http.post(f"/api/v1/runs/{run['id']}/status", json={"status": "succeeded", "reason": "budget"})
            assert done.status_code == 200, done.text
        assert not http.get(f"/api/v1/experiments/{exp_id}/verdict").json()["decided"]
    finished = wait(service.url, service.token, str(exp_id))
    assert finished.exit_code == EXIT_UNDECIDED, finished.output
    assert "] finished, not decided: " in finished.stderr


def test_auth_and_bad_input_have_their_own_codes(service: Service, tmp_path: Path) -> None:
    with service.http() as http:
        exp_id, _ = create(http, "auth")
    wrong = wait(service.url, "srl_wrong", str(exp_id))
    assert wrong.exit_code == EXIT_AUTH and "refused the token (401" in wrong.stderr
    missing = CliRunner().invoke(cli, ["wait", str(exp_id), "--url", service.url], env={
        "SCALERL_HOME": str(tmp_path), "SCALERL_TOKEN": ""})  # fmt: skip
    assert missing.exit_code == EXIT_AUTH and "no API token" in missing.stderr
    unknown = wait(service.url, service.token, "999")
    assert unknown.exit_code == EXIT_BAD_INPUT and "experiment 999 does not exist" in unknown.stderr
    no_name = wait(service.url, service.token, "no-such-grid")
    assert no_name.exit_code == EXIT_BAD_INPUT and "no experiment named 'no-such-grid'" in no_name.stderr
    bad = wait(service.url, service.token, str(exp_id), "--fail-if", "best>=x")
    assert bad.exit_code == EXIT_BAD_INPUT and "allowed: undecided" in bad.stderr


def test_submit_without_wait_prints_the_dashboard_and_how_to_reattach(service: Service, tmp_path: Path) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(sweep_doc(name="reattach")))
    env = {"SCALERL_HOME": str(tmp_path), "SCALERL_URL": service.url, "SCALERL_TOKEN": service.token}
    r = CliRunner().invoke(cli, ["submit", str(grid)], env=env)
    assert r.exit_code == EXIT_OK, r.output
    exp_id = int(r.stdout.split()[1])
    assert f"dashboard: {service.url}/experiments/{exp_id}" in r.stdout
    assert f"wait for its verdict: scalerl wait {exp_id}" in r.stdout


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_back_off_doubles_is_capped_and_retry_after_is_capped_too() -> None:
    clock = FakeClock()
    said: list[str] = []
    failures = [ServiceUnavailable("down")] * 8 + [ServiceUnavailable("busy", retry_after=600.0)]

    def request() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    patient = Patient(1000.0, said.append, max_backoff=60.0, sleep=clock.sleep, clock=lambda: clock.now)
    assert patient.call(request) == "ok"
    assert clock.slept == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert "retry 9 in 60 s" in said[-2] and said[-1] == "the service answers again (after 4m03s)"
    clock.slept.clear()

    def down() -> str:
        raise ServiceUnavailable("gone")

    with pytest.raises(Unreachable, match="no answer for 1m40s"):
        patient.call(down, deadline=clock.now + 100)
    assert sum(clock.slept) == pytest.approx(100)  # never sleeps past the deadline


def test_progress_prints_changes_and_a_heartbeat() -> None:
    clock = FakeClock()
    lines: list[str] = []
    progress = Progress(lines.append, heartbeat=60.0, clock=lambda: clock.now)
    waiting = {"decided": False, "finished": False, "best_run_id": 1, "runner_up_id": 2, "reason": "P = 0.6"}
    for _ in range(5):  # the same state every 10 s: one line, then the heartbeat
        progress.show(waiting)
        clock.sleep(10)
    assert lines == ["[0s] waiting: P = 0.6"]
    clock.sleep(20)
    progress.show(waiting)
    progress.show({**waiting, "decided": True, "reason": "P = 0.95"})
    assert lines[1:] == ["[1m10s] waiting: P = 0.6", "[1m10s] decided: P = 0.95"]
