"""A run's engine log, read for the dashboard: the tail of ``<runs_dir>/run-<id>/engine.log``, bounded, with the
lines that carry an error marked.

The worker writes the log (``worker.executor``: the engine's stdout and stderr, in the run's directory); the server
reads it only when it shares ``runs_dir`` with the worker (``scalerl up``/the demo, or a shared folder).

Invariants: the path is built from the run's integer id only (no client text reaches it); a run directory or log
that resolves outside ``runs_dir`` (a symlink) or is not a regular file is not read; at most ``max_bytes`` are read,
from the end of the file.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from rl_core.contracts.run_dir import ENGINE_LOG, service_run_dir

#: The most of a log's end that is read and shown.
MAX_TAIL_BYTES = 1024 * 1024
_TRACEBACK = "Traceback (most recent call last):"
_ERROR = re.compile(r"\b(\w*Error|\w*Exception|FATAL|CRITICAL|Killed|out of memory)\b|^error:", re.IGNORECASE)


@dataclass(frozen=True)
class LogTail:
    lines: list[str]
    size: int
    truncated: bool
    error_lines: list[int]


class LogUnavailable(Exception):
    """The log cannot be shown (the message says why, without saying what exists outside ``runs_dir``)."""


def run_log_path(runs_dir: Path, run_id: int) -> Path:
    return service_run_dir(runs_dir, run_id) / ENGINE_LOG


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root.resolve())
    except (OSError, ValueError):
        return False
    return True


def read_tail(runs_dir: Path, run_id: int, max_bytes: int) -> LogTail:
    """The last ``max_bytes`` (at most :data:`MAX_TAIL_BYTES`) of the run's engine log, as lines."""
    limit = max(1, min(int(max_bytes), MAX_TAIL_BYTES))
    path = run_log_path(runs_dir, run_id)
    missing = LogUnavailable(
        f"no engine log of run {run_id} where this server looks (its runs_dir): the worker that ran it keeps the log "
        "in its own runs_dir; share that folder with the server (SCALERL_RUNS_DIR) to see it here"
    )
    if not path.exists() or not _inside(path, runs_dir):
        raise missing
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise missing from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise missing
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - limit)
        fh.seek(start)
        data = fh.read(limit)
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first line was cut
    return LogTail(lines=lines, size=size, truncated=start > 0, error_lines=error_lines(lines))


def error_lines(lines: list[str]) -> list[int]:
    """Indexes of the lines that report an error: the whole last traceback (from its header to the exception line),
    and any other line naming an error or exception."""
    marked: set[int] = set()
    last = max((i for i, line in enumerate(lines) if line.startswith(_TRACEBACK)), default=None)
    if last is not None:
        end = last + 1
        while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
            end += 1
        marked.update(range(last, min(end + 1, len(lines))))
    marked.update(i for i, line in enumerate(lines) if _ERROR.search(line))
    return sorted(marked)
