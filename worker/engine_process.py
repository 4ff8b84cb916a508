"""The engine process the worker starts: ``python -m worker.engine_process CONFIG --out DIR [--resume]``.

It runs ``rl_core.engine.runner.run`` (what ``scalerl train`` runs) with the config's own sinks plus one that
turns SIGTERM into a cooperative stop: the engine stops at its next step boundary, checkpoints and exits with
status ``stopped``. Guarantees:
- SIGTERM (or SIGINT) asks for a cooperative stop and arms a watchdog thread: if the process is still alive
  ``--grace`` seconds later it SIGKILLs its whole process group (itself and its generator process), even when the
  main thread is stuck in native code and never runs the Python signal handler.
- If the worker that started it dies (kill -9, crash), the kernel sends it SIGTERM (``PR_SET_PDEATHSIG``), so no
  engine outlives its worker for longer than the grace period.
- It holds an exclusive lock on ``DIR/.engine.lock`` while it runs: a second engine on the same run directory
  (a retried attempt while the previous engine is still finishing) waits for it instead of interleaving.
Exit codes as ``scalerl train``: 0 succeeded or stopped, 1 failed, 2 bad config.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any

PR_SET_PDEATHSIG = 1
LOCK_WAIT_SECONDS = 600.0


class SignalStop:
    """A metric sink that asks the engine to stop once ``event`` is set."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def write(self, point: object) -> str:
        return "stop" if self.event.is_set() else "continue"

    def truncate_after(self, step: int) -> None:
        return None

    def close(self, status: str, reason: str) -> None:
        return None


def _die_with_parent() -> None:
    parent = os.getppid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: the worker's own SIGKILL of the process group still applies
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _install_stop(event: threading.Event, grace: float) -> None:
    """SIGTERM/SIGINT ask for a cooperative stop; a watchdog thread SIGKILLs the process group ``grace`` seconds
    after the first of: such a signal, or the death of the parent (the worker).

    The watchdog does not depend on the main thread: a Python signal handler runs only when the main thread
    executes bytecode, and a main thread blocked in native code (a torch or multiprocessing wait) would never run
    it. The signal's arrival is seen through ``signal.set_wakeup_fd``, which the interpreter writes at C level.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    parent = os.getppid()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if not event.is_set():
            event.set()
            with contextlib.suppress(OSError, ValueError):
                print(f"signal {signum}: stopping at the next step boundary (SIGKILL in {grace:g} s)", flush=True)

    def watchdog() -> None:
        stopping = {signal.SIGTERM, signal.SIGINT}
        while True:
            ready, _, _ = select.select([read_fd], [], [], 1.0)
            if ready and any(sig in stopping for sig in os.read(read_fd, 64)):
                break
            if os.getppid() != parent:
                break
        event.set()
        time.sleep(grace)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threading.Thread(target=watchdog, name="engine-watchdog", daemon=True).start()


def _lock(out: Path, stop: threading.Event) -> IO[str] | None:
    out.mkdir(parents=True, exist_ok=True)
    fh = (out / ".engine.lock").open("w")
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if stop.is_set() or time.monotonic() > deadline:
                fh.close()
                return None
            time.sleep(0.2)


def _sinks(cfg: Any, out: Path, stop: threading.Event) -> Any:
    """The config's sinks plus :class:`SignalStop`, created on first use: after ``run`` prepared the directory
    (a fresh run refuses a directory that already holds a metrics file)."""
    from rl_core.contracts.points import MetricPoint
    from rl_core.engine.runner import build_sinks
    from rl_core.engine.sinks import FinalStatus, MultiSink, SinkAction

    class LazySinks(MultiSink):
        def __init__(self) -> None:
            super().__init__([])
            self._built = False

        def _build(self) -> None:
            if not self._built:
                self.sinks = [*build_sinks(cfg, out).sinks, SignalStop(stop)]  # type: ignore[list-item]
                self._built = True

        def write(self, point: MetricPoint) -> SinkAction:
            self._build()
            return super().write(point)

        def truncate_after(self, step: int) -> None:
            self._build()
            super().truncate_after(step)

        def close(self, status: FinalStatus, reason: str) -> None:
            self._build()
            super().close(status, reason)

    return LazySinks()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.engine_process")
    parser.add_argument("config", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--grace", type=float, default=60.0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    _install_stop(stop, args.grace)
    _die_with_parent()
    lock = _lock(args.out, stop)
    if lock is None:
        print(f"error: another engine holds {args.out} (waited {LOCK_WAIT_SECONDS:g} s)", file=sys.stderr)
        return 1
    from rl_core.contracts.run_config import ConfigError, load_run_config
    from rl_core.engine.runner import run

    try:
        cfg = load_run_config(args.config)
        result = run(cfg, args.out, resume=args.resume, sinks=_sinks(cfg, args.out, stop))
    except (ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        lock.close()
    print(f"run {result.status} at step {result.step}: {result.reason}", flush=True)
    return 1 if result.status == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())
