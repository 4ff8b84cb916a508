"""A reporter's write-ahead folder: every point is on disk before ``log()`` returns, until the service stored it.

Layout (one folder per reporter, under the offline directory)::

    <dir>/<name>-<key>/run.json            the registration: name, key, resume policy, labels; the process (host,
                                           pid) that writes the folder; the run id once the service gave one
    <dir>/<name>-<key>/points-000001.jsonl one point per line (Point.to_json), appended, in segments
    <dir>/<name>-<key>/end.json            the final status and reason, when the trainer finished without
                                           delivering everything (or offline)
    <dir>/<name>-<key>/synced.json         written by ``scalerl sync`` once it delivered the folder

Invariants:
- A point is written (to the operating system: a ``kill -9`` of the trainer cannot lose it; a power cut can lose
  what the disk had not flushed) before :meth:`RunLog.append` returns; the folder is the reporter's memory of what
  the service has not confirmed, so a process killed outright loses nothing ``scalerl sync`` cannot send.
- Bounded: a segment holds at most :data:`SEGMENT_POINTS` lines; a segment whose every point the service stored is
  deleted; beyond ``max_points`` waiting lines the oldest segment is dropped (the reporter drops those points from
  memory too, with a warning).
- A reporter that finished with everything stored removes its folder; an unusable disk (full, read-only) turns the
  log off with one warning and never fails the training loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scalerl.client.api import Point

log = logging.getLogger("scalerl.client")

#: Lines per segment file: a segment is deleted once the service stored every point in it.
SEGMENT_POINTS = 10_000
RUN_FILE = "run.json"
#: Held (``flock``) by the process writing the folder while it lives: ``scalerl sync`` leaves a folder alone while
#: it is held, and knows its writer ended (cleanly or killed: the kernel releases it) once it is not.
LOCK_FILE = "lock"
END_FILE = "end.json"
SYNCED_FILE = "synced.json"


def default_dir() -> Path:
    """``$SCALERL_OFFLINE_DIR``, else ``$SCALERL_HOME/offline`` (``~/.scalerl/offline``)."""
    explicit = os.environ.get("SCALERL_OFFLINE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("SCALERL_HOME") or Path.home() / ".scalerl") / "offline"


def new_key() -> str:
    """A run key as W&B makes run ids: 8 random lowercase letters and digits."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(8))


def segment_name(index: int) -> str:
    return f"points-{index:06d}.jsonl"


def segment_files(folder: Path) -> list[Path]:
    """The folder's point files in write order (``points.jsonl`` of older clients first)."""
    old = [folder / "points.jsonl"] if (folder / "points.jsonl").exists() else []
    return old + sorted(folder.glob("points-[0-9]*.jsonl"))


def writer_alive(folder: Path) -> bool:
    """True while a process holds the folder's lock (it is writing it); False where locks are unsupported."""
    try:
        import fcntl
    except ImportError:  # not POSIX: every folder counts as ended
        return False
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def _hold_lock(folder: Path) -> int | None:
    try:
        import fcntl
    except ImportError:
        return None
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(data), indent=1))
    os.replace(tmp, path)


class RunLog:
    """One reporter's folder (see the module docstring). Not thread-safe: the reporter calls it under its lock."""

    def __init__(
        self,
        root: Path,
        name: str,
        key: str,
        registration: Mapping[str, Any],
        resume: str,
        *,
        max_points: int = 100_000,
    ) -> None:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "run"
        self.path = Path(root) / f"{slug}-{key}"
        self.max_points = max(SEGMENT_POINTS, max_points)
        self._run = {
            "name": name,
            "key": key,
            "resume": resume,
            **{k: v for k, v in registration.items() if v is not None},
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        self.enabled = True
        self.written = 0
        self._fd: int | None = None
        self._lock: int | None = None
        self._segment = 0
        self._lines = 0  # lines in the current segment
        self._where: dict[int, int] = {}  # step -> segment of its latest line not yet stored
        self._open: dict[int, int] = {}  # segment -> steps whose latest line is there and not yet stored

    # ---- writing --------------------------------------------------------------------------------------------

    def append(self, points: Iterable[Point]) -> None:
        """Write ``points`` (each one line) before returning; never raises (see the module docstring)."""
        if not self.enabled:
            return
        try:
            for point in points:
                self._write(point)
        except OSError as exc:
            self._disable(exc)

    def _write(self, point: Point) -> None:
        if self._fd is None or self._lines >= SEGMENT_POINTS:
            self._rotate()
        assert self._fd is not None
        os.write(self._fd, (json.dumps(point.to_json()) + "\n").encode())
        self._lines += 1
        self.written += 1
        before = self._where.get(point.step)
        if before is not None:
            self._open[before] -= 1
        self._where[point.step] = self._segment
        self._open[self._segment] = self._open.get(self._segment, 0) + 1
        if len(self._where) > self.max_points:
            self._drop_oldest()

    def _rotate(self) -> None:
        if self._fd is None and not self.path.exists():
            self.path.mkdir(parents=True)
            self._lock = _hold_lock(self.path)
            write_json(self.path / RUN_FILE, self._run)
        if self._fd is not None:
            os.close(self._fd)
        self._segment += 1
        self._lines = 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self._fd = os.open(self.path / segment_name(self._segment), flags, 0o600)
        self._forget_done()

    def _drop_oldest(self) -> None:
        oldest = min(self._open)
        for step in [s for s, seg in self._where.items() if seg == oldest]:
            del self._where[step]
        del self._open[oldest]
        (self.path / segment_name(oldest)).unlink(missing_ok=True)

    def _disable(self, exc: OSError) -> None:
        self.enabled = False
        log.warning("scalerl: cannot write points to %s (%s): a killed process would lose what is unsent", self.path,
                    exc)  # fmt: skip
        self._close_fd()

    # ---- what the service stored ----------------------------------------------------------------------------

    def stored(self, steps: Iterable[int]) -> None:
        """The service stored (or refused for good) these steps' latest lines: a segment left with none waiting is
        deleted, unless it is the one being written."""
        for step in steps:
            seg = self._where.pop(step, None)
            if seg is not None:
                self._open[seg] -= 1
        self._forget_done()

    def _forget_done(self) -> None:
        for seg in [s for s, n in self._open.items() if n <= 0 and s != self._segment]:
            del self._open[seg]
            (self.path / segment_name(seg)).unlink(missing_ok=True)

    @property
    def waiting(self) -> int:
        """Steps written and not yet stored by the service."""
        return len(self._where)

    # ---- the run's identity and end -------------------------------------------------------------------------

    def registered(self, run_id: int, name: str) -> None:
        """Remember the run the service gave (``scalerl sync`` sends a killed process's points there)."""
        self._run.update(run_id=run_id, registered_name=name)
        if self.enabled and self.path.exists():
            try:
                write_json(self.path / RUN_FILE, self._run)
            except OSError as exc:
                self._disable(exc)

    def end(self, status: str, reason: str) -> None:
        """Keep the folder for ``scalerl sync`` with the final status the service did not get."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            write_json(self.path / RUN_FILE, self._run)
            write_json(self.path / END_FILE, {"status": status, "reason": reason})
        except OSError as exc:
            log.warning("scalerl: could not keep the final status in %s: %s", self.path, exc)
        self._close_fd()

    def release(self) -> None:
        """Stop writing and release the folder as it is (a process that ends without a final status)."""
        self._close_fd()

    def remove(self) -> None:
        """Everything was stored: the folder is not needed any more."""
        self._close_fd()
        shutil.rmtree(self.path, ignore_errors=True)

    def _close_fd(self) -> None:
        """Close the segment and release the folder (``scalerl sync`` may send it from now on)."""
        for fd in (self._fd, self._lock):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock = None
