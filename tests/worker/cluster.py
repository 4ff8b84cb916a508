"""Real processes for the worker tests: a second Redis we may kill, the REST server and Celery workers as
subprocesses, on an isolated PostgreSQL database; tiny engine configs so a run takes seconds."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.tiny_run import TINY_RECIPE

REPO = Path(__file__).resolve().parents[2]
TASK = "{kind: synthetic-addition, digits_max: 1, train_size: 20, validation_size: 4}"
MODEL = "{preset: tiny, num_hidden_layers: 1, hidden_size: 32, intermediate_size: 64}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def grid(name: str, *, recipe: dict[str, Any] | None = None, budget: float = 1.0) -> dict[str, Any]:
    return {"name": name, "task": TASK, "model": MODEL, "budget": budget, "recipe": {**TINY_RECIPE, **(recipe or {})}}


def write_template(path: Path, steps: int, *, checkpoint_every: int = 2) -> Path:
    doc = {
        "budget": {"steps": steps},
        "eval": {"every": 2, "k": 1},
        "checkpoint": {"every": checkpoint_every},
        "generator": {"max_new_tokens": 8},
        "sinks": {"console": False, "csv": False},
    }
    path.write_text(yaml.safe_dump(doc))
    return path


class RedisServer:
    """A redis-server of our own on a free loopback port (the shared one is never touched)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        assert exe is not None
        self.proc = subprocess.Popen(
            [
                exe,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        wait_for(lambda: _ping(client), 15, "redis to start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def _ping(client: Any) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False


@dataclass
class Cluster:
    """Server + workers as subprocesses; ``env`` is what every process gets."""

    home: Path
    env: dict[str, str]
    url: str
    token: str
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, name: str, *args: str, extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "scalerl.cli", *args],
            cwd=REPO,
            env={**self.env, **(extra or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def start_server(self) -> None:
        port = self.url.rsplit(":", 1)[1]
        self.spawn("server", "server", "--host", "127.0.0.1", "--port", port)
        wait_for(self.healthy, 60, "the server")

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def start_worker(self, queue: str, name: str | None = None) -> subprocess.Popen[bytes]:
        name = name or f"worker-{queue}"
        return self.spawn(name, "worker", "--queues", queue, extra={"SCALERL_WORKER_NAME": f"{name}@test"})

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 60) -> None:
        proc = self.procs.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
            proc.wait(timeout)

    def stop_all(self) -> None:
        """Every process spawned (workers under any name, e.g. a test's hosts), then the server last."""
        for name in [n for n in self.procs if n != "server"] + [n for n in self.procs if n == "server"]:
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.procs.clear()

    # ---- REST helpers ------------------------------------------------------------------------------------------

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"}
        resp = httpx.request(method, f"{self.url}{path}", headers=headers, timeout=30, **kwargs)
        assert resp.status_code < 400, (resp.status_code, resp.text)
        return resp.json() if resp.content else None

    def submit(self, doc: dict[str, Any]) -> int:
        """Create the experiment; the id of its (single) run."""
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        resp = httpx.post(f"{self.url}/api/v1/experiments", content=json.dumps(doc), headers=headers, timeout=30)
        assert resp.status_code == 201, resp.text
        runs = self.api("GET", "/api/v1/runs", params={"experiment_id": resp.json()["id"]})
        return int(runs[0]["id"])

    def run(self, run_id: int) -> dict[str, Any]:
        return self.api("GET", f"/api/v1/runs/{run_id}")  # type: ignore[no-any-return]

    def steps(self, run_id: int) -> list[int]:
        return [p["step"] for p in self.api("GET", f"/api/v1/runs/{run_id}/metrics")]

    def wait_status(self, run_id: int, statuses: set[str], timeout: float) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            try:
                run = self.run(run_id)
            except (httpx.HTTPError, AssertionError):
                return None
            return run if run["status"] in statuses else None

        return wait_for(check, timeout, f"run {run_id} to reach {statuses}", interval=0.5)  # type: ignore[no-any-return]

    def wait_steps(self, run_id: int, at_least: int, timeout: float) -> list[int]:
        def check() -> list[int] | None:
            try:
                steps = self.steps(run_id)
            except (httpx.HTTPError, AssertionError):
                return None
            return steps if steps and steps[-1] >= at_least else None

        return wait_for(check, timeout, f"run {run_id} to report step {at_least}", interval=0.3)  # type: ignore[no-any-return]


def make_cluster(home: Path, database_url: str, broker_url: str, token: str, steps: int, **more: str) -> Cluster:
    """A cluster, nothing started yet: the service on a free loopback port over ``database_url`` and ``broker_url``,
    logs in ``home/logs``, an engine template of ``steps`` steps, and polls, heartbeats and backoffs of about a
    second so that a test waits seconds; ``more`` adds or overrides environment variables by their full names."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "SCALERL_HOME": str(home),
        "SCALERL_DATABASE_URL": database_url,
        "SCALERL_BROKER_URL": broker_url,
        "SCALERL_SERVER_URL": url,
        "SCALERL_TOKEN": token,
        "SCALERL_ENGINE_TEMPLATE": str(write_template(home / "template.yaml", steps)),
        "SCALERL_HEARTBEAT_SECONDS": "1",
        "SCALERL_REAPER_INTERVAL_SECONDS": "1",
        "SCALERL_SUPERVISE_SECONDS": "0.5",
        "SCALERL_POLL_SECONDS": "0.2",
        "SCALERL_MAX_BACKOFF_SECONDS": "1",
        "SCALERL_INTERVAL_REFIT": "false",
        "PYTHONUNBUFFERED": "1",
        **more,
    }
    return Cluster(home=home, env=env, url=url, token=token, logs=logs)
