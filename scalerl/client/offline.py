"""Points kept on disk while the service cannot be reached, and ``scalerl sync`` that sends them later.

Layout (one folder per reporter, under the offline directory)::

    <dir>/<name>-<id>/run.json        the registration: name, experiment, budget, labels, resume policy
    <dir>/<name>-<id>/points.jsonl    one point per line (Point.to_json), appended
    <dir>/<name>-<id>/end.json        the final status and reason, once the trainer finished
    <dir>/<name>-<id>/synced.json     written by sync once every point and the status were stored

Invariants: a folder is synced at most once (``synced.json`` is written only after the service stored every point
and the status; a sync that fails half-way is simply run again, since the service is idempotent by (run, step));
lines that are not valid points (a process killed mid-write) are skipped and counted, never fatal.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.client.api import ApiError, Client, Point

#: Points per request when syncing.
SYNC_BATCH = 1000


def default_dir() -> Path:
    """``$SCALERL_OFFLINE_DIR``, else ``$SCALERL_HOME/offline`` (``~/.scalerl/offline``)."""
    explicit = os.environ.get("SCALERL_OFFLINE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("SCALERL_HOME") or Path.home() / ".scalerl") / "offline"


class Spool:
    """One reporter's folder: created on first use, appended to from the reporter's threads (callers serialise)."""

    def __init__(self, root: Path, name: str, registration: Mapping[str, Any], resume: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "run"
        self.path = Path(root) / f"{slug}-{secrets.token_hex(4)}"
        self._registration = {
            "name": name,
            "resume": resume,
            **{k: v for k, v in registration.items() if v is not None},
        }
        self.points = 0

    def _ensure(self) -> None:
        if not self.path.exists():
            self.path.mkdir(parents=True)
            (self.path / "run.json").write_text(json.dumps(self._registration, indent=1))

    def append(self, points: Iterable[Point], *, durable: bool = True) -> int:
        """Write ``points`` (``durable``: on disk before this returns); returns how many."""
        lines = [json.dumps(p.to_json()) + "\n" for p in points]
        if not lines:
            return 0
        self._ensure()
        with (self.path / "points.jsonl").open("a") as f:
            f.writelines(lines)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        self.points += len(lines)
        return len(lines)

    def end(self, status: str, reason: str) -> None:
        self._ensure()
        (self.path / "end.json").write_text(json.dumps({"status": status, "reason": reason}))

    def discard(self) -> None:
        """Forget what was written during an outage that is over (the service stored every point of it); a folder
        with a final status is kept for ``scalerl sync``."""
        if self.path.exists() and not (self.path / "end.json").exists():
            shutil.rmtree(self.path, ignore_errors=True)
        self.points = 0


@dataclass(frozen=True)
class Synced:
    """What ``sync`` did with one folder."""

    folder: Path
    run_id: int | None
    run_name: str
    points: int
    skipped_lines: int
    status: str | None
    already: bool = False
    error: str | None = None


def _read_points(path: Path) -> tuple[list[Point], int]:
    points: list[Point] = []
    skipped = 0
    if not path.exists():
        return points, 0
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
            points.append(Point.make(d["step"], d["compute"], d.get("pass_rate"), d.get("metrics")))
        except (ValueError, KeyError, TypeError):
            skipped += 1
    return points, skipped


def sync_folder(client: Client, folder: Path) -> Synced:
    """Send one folder's points (and final status) to the service, exactly once (see the module docstring)."""
    done = folder / "synced.json"
    if done.exists():
        info = json.loads(done.read_text())
        return Synced(folder, info.get("run_id"), str(info.get("name", "")), 0, 0, info.get("status"), already=True)
    reg = json.loads((folder / "run.json").read_text())
    name = str(reg.pop("name"))
    reg.pop("resume", None)
    run_id = reg.pop("run_id", None)
    points, skipped = _read_points(folder / "points.jsonl")
    # A reporter attached by id sends to that run; a named one to the same run as the online part of its life (a
    # lost or running run of that name), reopened if it ended meanwhile: its points are idempotent by step.
    run = client.run_info(int(run_id)) if run_id is not None else client.register_run(name, resume="allow", **reg)
    merged: dict[int, Point] = {}
    for p in points:
        merged[p.step] = merged[p.step].merged(p) if p.step in merged else p
    ordered = [merged[s] for s in sorted(merged)]
    for i in range(0, len(ordered), SYNC_BATCH):
        client.post_points(run.id, ordered[i : i + SYNC_BATCH])
    status = None
    end = folder / "end.json"
    if end.exists():
        e = json.loads(end.read_text())
        status = str(e["status"])
        current = client.run_info(run.id).status
        if current != status:
            try:
                client.report_status(run.id, status, f"{e.get('reason') or status} (synced by scalerl sync)")
            except ApiError as exc:
                if exc.status_code != 409:  # already ended another way: its points are stored, that is what counts
                    raise
    done.write_text(json.dumps({"run_id": run.id, "name": run.name, "points": len(ordered), "status": status}))
    return Synced(folder, run.id, run.name, len(ordered), skipped, status)


def sync_dir(client: Client, root: Path) -> list[Synced]:
    """Sync every folder under ``root`` (or ``root`` itself when it is one folder), oldest first."""
    root = Path(root)
    folders = [root] if (root / "run.json").exists() else sorted(
        (p for p in root.iterdir() if (p / "run.json").exists()), key=lambda p: p.stat().st_mtime
    )  # fmt: skip
    out: list[Synced] = []
    for folder in folders:
        try:
            out.append(sync_folder(client, folder))
        except ApiError as exc:  # this folder is refused (e.g. its experiment's unit): the others still go
            out.append(Synced(folder, None, folder.name, 0, 0, None, error=str(exc)))
    return out
