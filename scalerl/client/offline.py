"""``scalerl sync``: send what reporters kept on disk (:mod:`scalerl.client.runlog`) to the service, exactly once.

A folder is sent when its writer has ended (its lock is free): a reporter that could not reach the service, one
``mode="offline"``, or one whose process was killed (its write-ahead points). Each folder is one run:

- a folder whose reporter registered holds the run's id: its points go there;
- one that never registered holds its own key (W&B's run id): the service gives the key a run of its own (named
  as the folder says, ``<name>-2`` when another run has the name), so two offline runs that share a name never
  merge, and syncing a folder again reaches the same run;
- the final status in ``end.json`` is reported; a folder without one belongs to a process that died without
  finishing: its run ends ``lost`` (a live run is never left ``running`` with nobody behind it).

Invariants: a folder is marked synced (``synced.json``) only after the service stored every point and the status;
a sync cut short is simply run again (the service is idempotent by (run, step) and by key); lines that are not
valid points (a process killed mid-write) are skipped and counted, never fatal; the answer counts exactly what the
service stored, found already stored, and refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalerl.client.api import ApiError, Client, Point, RunInfo
from scalerl.client.runlog import END_FILE, RUN_FILE, SYNCED_FILE, default_dir, segment_files, writer_alive

__all__ = ["SYNC_BATCH", "Synced", "default_dir", "sync_dir", "sync_folder"]

#: Points per request when syncing.
SYNC_BATCH = 1000
#: Statuses a synced run of a dead process is still in (it becomes ``lost``).
_UNFINISHED = ("queued", "running", "stopping")


@dataclass(frozen=True)
class Synced:
    """What ``sync`` did with one folder: ``points`` read (one per step), of which the service ``stored`` new,
    found ``duplicates`` (already stored) and ``refused``; ``busy``: its writer is alive, left alone."""

    folder: Path
    run_id: int | None
    run_name: str
    points: int
    skipped_lines: int
    status: str | None
    stored: int = 0
    duplicates: int = 0
    refused: int = 0
    already: bool = False
    busy: bool = False
    error: str | None = None


def _read_points(folder: Path) -> tuple[list[Point], int]:
    """One point per step (a step written twice: the lines merged in order), and the unreadable lines."""
    merged: dict[int, Point] = {}
    skipped = 0
    for path in segment_files(folder):
        for line in path.read_text().splitlines():
            try:
                d = json.loads(line)
                p = Point.make(d["step"], d["compute"], d.get("pass_rate"), d.get("metrics"))
            except (ValueError, KeyError, TypeError):
                skipped += 1
                continue
            merged[p.step] = merged[p.step].merged(p) if p.step in merged else p
    return [merged[s] for s in sorted(merged)], skipped


def _run_of(client: Client, reg: dict[str, Any]) -> RunInfo:
    """The run the folder's points belong to (see the module docstring)."""
    name = str(reg.pop("name"))
    run_id = reg.pop("run_id", None)
    for label in ("resume", "host", "pid", "registered_name"):
        reg.pop(label, None)
    if run_id is not None:
        return client.run_info(int(run_id))
    key = reg.pop("key", None)
    # A folder of an older client has no key: the run of its name, as that client's sync did.
    return client.register_run(name, key=key, resume="allow", **reg)


def sync_folder(client: Client, folder: Path) -> Synced:
    """Send one folder's points and final status to the service, exactly once (see the module docstring)."""
    done = folder / SYNCED_FILE
    if done.exists():
        info = json.loads(done.read_text())
        return Synced(folder, info.get("run_id"), str(info.get("name", "")), 0, 0, info.get("status"), already=True)
    reg = json.loads((folder / RUN_FILE).read_text())
    if writer_alive(folder):
        name = str(reg.get("registered_name") or reg.get("name"))
        return Synced(folder, reg.get("run_id"), name, 0, 0, None, busy=True)
    points, skipped = _read_points(folder)
    run = _run_of(client, reg)
    stored = duplicates = refused = 0
    for i in range(0, len(points), SYNC_BATCH):
        answer = client.post_points(run.id, points[i : i + SYNC_BATCH])
        stored += answer.accepted
        duplicates += answer.duplicates
        refused += answer.n_rejected
    end = folder / END_FILE
    if end.exists():
        e = json.loads(end.read_text())
        status, reason = str(e["status"]), f"{e.get('reason') or e['status']} (synced by scalerl sync)"
    else:
        status = "lost"
        where = f"process {reg.get('pid', '?')} on {reg.get('host', '?')}"
        reason = f"its trainer ({where}) ended without finishing: killed? (synced by scalerl sync)"
    current = client.run_info(run.id).status
    if current != status and (status != "lost" or current in _UNFINISHED):
        try:
            client.report_status(run.id, status, reason)
        except ApiError as exc:
            if exc.status_code != 409:  # already ended another way: its points are stored, that is what counts
                raise
    body = {"run_id": run.id, "name": run.name, "points": len(points), "stored": stored, "status": status}
    done.write_text(json.dumps(body))
    return Synced(folder, run.id, run.name, len(points), skipped, status, stored, duplicates, refused)


def sync_dir(client: Client, root: Path) -> list[Synced]:
    """Sync every folder under ``root`` (or ``root`` itself when it is one folder), oldest first."""
    root = Path(root)
    folders = [root] if (root / RUN_FILE).exists() else sorted(
        (p for p in root.iterdir() if (p / RUN_FILE).exists()), key=lambda p: p.stat().st_mtime
    )  # fmt: skip
    out: list[Synced] = []
    for folder in folders:
        try:
            out.append(sync_folder(client, folder))
        except ApiError as exc:  # this folder is refused (e.g. its experiment's unit): the others still go
            out.append(Synced(folder, None, folder.name, 0, 0, None, error=str(exc)))
    return out
