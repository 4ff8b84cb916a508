"""``scalerl up``: the embedded all-in-one on 127.0.0.1 — the REST server, a ``cpu`` worker (supervisor, alerts)
and a ``gpu`` worker, on SQLite and kombu's SQLAlchemy broker under ``SCALERL_HOME``, each in its own process.

Invariants: one ``scalerl up`` per home at a time (an exclusive lock on ``<home>/up.lock``); runs leased by the
embedded worker of an earlier ``scalerl up`` that did not end cleanly have their lease expired at start, so the
reaper marks them ``lost`` and the supervisor re-queues them from their checkpoints; shutdown stops the gpu worker
first (its run checkpoints and is released for the next start), then the cpu worker, then the server.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy import update

from scalerl.client.api import Client, ScalerlError
from server.lifecycle.status import LEASED
from server.runtime.bootstrap import initialise, read_credentials, server_url, write_credentials
from server.store.db import make_engine, session_factory
from server.store.models import Run, utcnow
from server.store.settings import Settings

EMBEDDED_GPU_WORKER = "embedded-gpu"
STARTUP_SECONDS = 90.0


class UpError(RuntimeError):
    """``scalerl up`` cannot start (the message says why)."""


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


def lock_home(home: Path) -> IO[str]:
    home.mkdir(parents=True, exist_ok=True)
    fh = (home / "up.lock").open("w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise UpError(f"another `scalerl up` is running with home {home}") from None
    return fh


def expire_embedded_leases(database_url: str) -> int:
    """Expire the leases held by an earlier embedded gpu worker; returns how many runs."""
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            result = session.execute(
                update(Run)
                .where(Run.status.in_(LEASED), Run.lease_owner.like(f"{EMBEDDED_GPU_WORKER}@%"))
                .values(lease_expires_at=utcnow())
            )
            return int(getattr(result, "rowcount", 0) or 0)
    finally:
        engine.dispose()


def _spawn(name: str, args: list[str], env: dict[str, str], logs: Path) -> Child:
    path = logs / f"{name}.log"
    with path.open("ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scalerl.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return Child(name, proc, path)


def port_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (one line naming the port and how to choose another), or
    ``None`` when it can. Checked before anything starts: with the port taken, the health check used to find the
    *other* program's server, and "scalerl is up" was printed before the server failed with "address in use"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT does not count
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is in use (another scalerl, or another program); choose another with "
                    f"--port N or SCALERL_PORT=N"
                )
            reason = exc.strerror or exc
            return f"cannot listen on {host}:{port}: {reason}; choose another with --port N or SCALERL_PORT=N"
    return None


class HeldPort:
    """A port held for the server from the check until the server binds it: bound and listening (a socket bound
    without listening does not keep another program that binds with ``SO_REUSEADDR``, as uvicorn does, off the
    port). :func:`run_up` releases it just before it starts the server on it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock: socket.socket | None = sock

    @property
    def held(self) -> bool:
        return self._sock is not None

    def release(self) -> None:
        """Free the port (idempotent)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def hold_port(host: str, port: int) -> HeldPort:
    """Hold ``host:port`` for the server (raises :class:`UpError` with :func:`port_problem`'s line when it cannot)."""
    problem = port_problem(host, port)
    if problem is not None:
        raise UpError(problem)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT does not count
        sock.bind((host, port))
        sock.listen(1)
    except OSError as exc:
        sock.close()
        raise UpError(port_problem(host, port) or f"cannot listen on {host}:{port}: {exc}") from None
    return HeldPort(sock)


def sync_credentials(settings: Settings) -> None:
    """Point the saved credentials at the URL this server really listens on: after ``--port`` or ``SCALERL_PORT``
    moved it, ``scalerl submit`` and the client read ``credentials.json`` and went to the old port."""
    saved = read_credentials(settings.home)
    url = server_url(settings)
    if saved.get("token") and saved.get("url") != url:
        write_credentials(settings.credentials_path, url, saved["token"])


def _wait_healthy(url: str, child: Child) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if child.proc.poll() is not None:
            raise UpError(f"the server exited with code {child.proc.returncode}; see {child.log}")
        try:
            with Client(url, None, timeout=2, from_environment=False) as probe:
                probe.health()
            if child.proc.poll() is None:
                return
        except ScalerlError:
            pass
        time.sleep(0.2)
    raise UpError(f"the server did not answer on {url} within {STARTUP_SECONDS:g} s; see {child.log}")


def stop_child(child: Child, timeout: float) -> None:
    if child.proc.poll() is None:
        child.proc.send_signal(signal.SIGTERM)
        try:
            child.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.proc.pid, signal.SIGKILL)
            child.proc.wait(10)


#: The signals that stop everything as Ctrl-C does (SIGHUP: the terminal closed).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(_signum: int, _frame: object) -> None:
    # Only the first signal interrupts: the next ones (a SIGTERM to the process group reaches `make` too, which
    # passes it on) must not break off the stopping of the children, which then kept serving, reparented to PID 1.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP stop this process as Ctrl-C does (a ``KeyboardInterrupt``, once)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)


def run_up(settings: Settings, echo: Callable[[str], None], stop_grace: float, held: HeldPort | None = None) -> int:
    """Start everything, wait for Ctrl-C, SIGTERM or SIGHUP (or a child dying), stop everything; the exit code.
    ``held``: the server's port, held by the caller since its own check (released just before the server starts
    on it, and in any case before this returns); without it the port is checked here."""
    try:
        if held is None:
            problem = port_problem(settings.host, settings.port)
            if problem is not None:
                raise UpError(problem)
        return _run_up(settings, echo, stop_grace, held)
    finally:
        if held is not None:
            held.release()


def _run_up(settings: Settings, echo: Callable[[str], None], stop_grace: float, held: HeldPort | None) -> int:
    lock = lock_home(settings.home)
    stop_on_signals()
    try:
        initialise(settings)
        sync_credentials(settings)
        token = read_credentials(settings.home).get("token")
        if not token:
            raise UpError(
                f"no saved token in {settings.credentials_path}; create one with `scalerl token create NAME "
                '--scope admin` and save it there as {"url": ..., "token": ...}'
            )
        expired = expire_embedded_leases(settings.database_url)
        url = server_url(settings)
        logs = settings.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SCALERL_HOME": str(settings.home),
            "SCALERL_DATABASE_URL": settings.database_url,
            "SCALERL_SERVER_URL": url,
            "SCALERL_TOKEN": token,
            "SCALERL_STOP_GRACE_SECONDS": str(stop_grace),
        }
        children: list[Child] = []
        try:
            if held is not None:
                held.release()  # the server binds it next
            server = _spawn("server", ["server", "--host", settings.host, "--port", str(settings.port)], env, logs)
            children.append(server)
            _wait_healthy(url, server)
            children.append(_spawn("worker-cpu", ["worker", "--queues", "cpu"], env, logs))
            gpu_env = {**env, "SCALERL_WORKER_NAME": f"{EMBEDDED_GPU_WORKER}@{os.uname().nodename}"}
            children.append(_spawn("worker-gpu", ["worker", "--queues", "gpu"], gpu_env, logs))
            echo(f"scalerl is up at {url}")
            echo(f"API token: {settings.credentials_path}")
            echo(f"logs: {logs}; runs: {settings.home / 'runs'}")
            if expired:
                echo(f"{expired} unfinished run(s) of the last session will be resumed from their checkpoints")
            echo("Ctrl-C stops everything")
            return _watch(children, echo)
        except KeyboardInterrupt:
            return 0
        finally:
            echo("stopping: the gpu worker checkpoints its run, then the cpu worker and the server stop")
            for child in reversed(children):
                stop_child(child, stop_grace + 60 if child.name == "worker-gpu" else 30)
    finally:
        lock.close()


def _watch(children: list[Child], echo: Callable[[str], None]) -> int:
    while True:
        for child in children:
            if child.proc.poll() is not None:
                echo(f"error: {child.name} exited with code {child.proc.returncode}; see {child.log}")
                return 1
        time.sleep(0.5)
