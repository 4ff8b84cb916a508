"""One attempt's run directory kept in step with the run storage (:mod:`worker.storage`).

- Before the engine starts, :meth:`RunSync.restore` puts the newest complete checkpoint of the run in the local run
  directory when storage holds a newer one than the directory (a run that another host ran, or this host's
  directory lost): the engine then resumes from it as from its own checkpoint.
- While the engine runs, a thread polls ``checkpoints/latest`` every ``poll_seconds``; each new checkpoint is
  snapshotted (hard links: the engine keeps writing and pruning its own folders) and uploaded with the run's
  ``config.yaml`` and ``metrics.jsonl`` (the points up to the checkpoint, which a host that resumes there must still
  be able to deliver), then storage is pruned to ``keep`` checkpoints. An upload that fails is retried at the next
  poll with the newest checkpoint then; the engine never waits for storage.
- At the attempt's end, :meth:`RunSync.finish` uploads the last checkpoint (the one the engine wrote when it was
  stopped) and the engine's log, before the worker reports how the attempt ended (a run released by a worker
  shutting down is queued again at once, and the next host fetches what is in storage then).

Invariant: an upload of step ``s`` is made only from a checkpoint folder that was still among the engine's newest
``keep`` after it was snapshotted (the engine deletes a folder only once ``keep`` newer ones exist), so a snapshot is
never a half-deleted folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from rl_core.contracts.run_dir import (
    CHECKPOINT_STATE,
    CONFIG_FILE,
    ENGINE_LOG,
    LATEST,
    METRICS_FILE,
    RunDir,
    latest_checkpoint,
)
from worker.storage import RunStorage, StorageError

log = logging.getLogger("scalerl.worker")
STAGING = ".upload"


def _step_of(name: str) -> int | None:
    if not name.startswith("step_"):
        return None
    try:
        return int(name[len("step_") :])
    except ValueError:
        return None


def _snapshot(source: Path, dest: Path) -> None:
    """Hard-link every file of ``source`` under ``dest`` (a copy where links are refused)."""
    for dirpath, _dirs, names in os.walk(source):
        rel = Path(dirpath).relative_to(source)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            src = Path(dirpath) / name
            try:
                os.link(src, dest / rel / name)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                shutil.copy2(src, dest / rel / name)


class RunSync:
    """Uploads and restores the checkpoints of one attempt (module doc)."""

    def __init__(
        self,
        storage: RunStorage,
        run_id: int,
        run_dir: Path,
        *,
        attempt: int,
        keep: int = 2,
        engine_keep: int = 2,
        poll_seconds: float = 0.5,
        origin: str = "",
    ) -> None:
        self.storage = storage
        self.run_id = run_id
        self.run_dir = run_dir
        self.attempt = attempt
        self.keep = keep
        self.engine_keep = max(1, engine_keep)
        self.poll_seconds = poll_seconds
        self.origin = origin
        self.uploaded_step = -1
        """The newest step in storage as far as this attempt knows (its own uploads, or what it found there)."""
        self.uploads = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @staticmethod
    def engine_keep_of(cfg: dict[str, Any]) -> int:
        return int((cfg.get("checkpoint") or {}).get("keep") or 2)

    # ---- before the engine --------------------------------------------------------------------------------------

    def restore_retrying(self, timeout: float, cap: float) -> str:
        """:meth:`restore`, retried with back-off while storage fails, for up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.5
        while True:
            try:
                return self.restore()
            except StorageError as exc:
                if time.monotonic() + delay > deadline:
                    raise
                log.warning("run %s: run storage: %s; retrying in %.1f s", self.run_id, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, cap)

    def restore(self) -> str:
        """Fetch the newest checkpoint in storage when it is newer than the run directory's own; what was done.
        Raises :class:`StorageError` when storage cannot be read (or holds checkpoints that cannot be fetched)."""
        local = latest_checkpoint(RunDir(self.run_dir).checkpoints)
        local_step = _step_of(local.name) if local is not None else None
        remote = self.storage.newest_step(self.run_id)
        if remote is None:
            return "no checkpoint in run storage" + ("" if local is None else f"; the local one at step {local_step}")
        self.uploaded_step = remote
        if local_step is not None and local_step >= remote:
            return f"the local checkpoint at step {local_step} is the newest (run storage: step {remote})"
        t0 = time.monotonic()
        got = self.storage.fetch_checkpoint(self.run_id, self.run_dir)
        assert got is not None  # storage held one a moment ago; a run's checkpoints are never all deleted
        self.uploaded_step = got.step
        size = sum(int(f["size"]) for f in got.files.values())
        return (
            f"fetched checkpoint step {got.step} from run storage ({len(got.files)} files, {size / 1e6:.1f} MB, "
            f"{time.monotonic() - t0:.1f} s; uploaded by {got.origin})"
        )

    # ---- while the engine runs ----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"run-sync-{self.run_id}", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            self.sync_once()

    def sync_once(self) -> bool:
        """Upload the engine's newest checkpoint when storage lacks it; True when one was uploaded."""
        with self._lock:
            try:
                return self._sync_once()
            except StorageError as exc:
                if str(exc) != self.last_error:
                    log.warning("run %s: checkpoint not uploaded (%s); retrying at the next poll", self.run_id, exc)
                self.last_error = str(exc)
                return False

    def _sync_once(self) -> bool:
        checkpoints = RunDir(self.run_dir).checkpoints
        for _ in range(5):  # a newer checkpoint appeared while snapshotting: take that one
            try:
                name = (checkpoints / LATEST).read_text(encoding="utf-8").strip()
            except OSError:
                return False
            step = _step_of(name)
            if step is None or step <= self.uploaded_step:
                return False
            staged = self.run_dir / STAGING / name
            shutil.rmtree(staged, ignore_errors=True)
            try:
                _snapshot(checkpoints / name, staged)
                if name not in self._newest(checkpoints, self.engine_keep):
                    continue  # pruned by the engine while it was linked: maybe incomplete
                # The run's config (what --resume checks) and its points: the engine writes a step's point before
                # its checkpoint, and the points above the service's last stored step exist only in this file until
                # they are delivered; without it a host that resumes the run could never send them.
                for extra in (CONFIG_FILE, METRICS_FILE):
                    if (self.run_dir / extra).is_file():
                        shutil.copy2(self.run_dir / extra, staged / extra)
                if not (staged / CHECKPOINT_STATE).is_file():
                    continue
                t0 = time.monotonic()
                manifest = self.storage.upload_checkpoint(self.run_id, step, staged, origin=self.origin)
                size = sum(int(f["size"]) for f in manifest.files.values())
                log.info(
                    "run %s: checkpoint step %s uploaded to run storage (%.1f MB, %.1f s)",
                    self.run_id,
                    step,
                    size / 1e6,
                    time.monotonic() - t0,
                )
                self.uploaded_step = step
                self.uploads += 1
                self.last_error = None
                self.storage.prune(self.run_id, self.keep)
                return True
            except FileNotFoundError:
                continue
            finally:
                shutil.rmtree(staged, ignore_errors=True)
        return False

    @staticmethod
    def _newest(checkpoints: Path, keep: int) -> list[str]:
        try:
            names = sorted(p.name for p in checkpoints.iterdir() if p.is_dir() and _step_of(p.name) is not None)
        except OSError:
            return []
        return names[-keep:]

    # ---- at the attempt's end -----------------------------------------------------------------------------------

    def finish(self, *, upload: bool, timeout: float) -> None:
        """Stop polling; with ``upload``, upload the last checkpoint (retrying until ``timeout`` seconds) and the
        engine log. Never raises: what storage refused is logged."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if upload:
            deadline = time.monotonic() + timeout
            delay = 0.5
            while True:
                self.sync_once()
                if self.last_error is None or time.monotonic() + delay > deadline:
                    break
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
            if self.last_error is not None:
                log.error("run %s: the last checkpoint is not in run storage: %s", self.run_id, self.last_error)
            engine_log = self.run_dir / ENGINE_LOG
            if engine_log.is_file():
                try:
                    self.storage.upload_file(self.run_id, f"logs/attempt-{self.attempt}.{ENGINE_LOG}", engine_log)
                except StorageError as exc:
                    log.warning("run %s: engine log not uploaded: %s", self.run_id, exc)
        shutil.rmtree(self.run_dir / STAGING, ignore_errors=True)
        self.storage.close()
