"""The run directory: what the engine writes under ``<out>/`` and the worker and CLI read, and the resume rule.

Layout::

    config.yaml           the run config as the engine uses it (canonical mapping)
    engine.log            the engine process's log (when a worker runs it)
    metrics.jsonl         one point per line (rl_core.contracts.points); durable before it is reported
    metrics.csv           the same points as a table (optional)
    status.json           {"status", "reason", "step"}, written when the engine ends, whatever happens
    checkpoints/latest    the name of the newest complete checkpoint directory (step_000040)
    checkpoints/step_*/engine.json   present exactly when that checkpoint is complete

Resume rule: a directory is resumed only when it holds a complete checkpoint and the new config equals the saved
one apart from the sections in ``RESUME_MUTABLE`` (a budget extended by the service, another device); anything
else is a new run. Torch-free and server-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
STATUS_FILE = "status.json"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
CHECKPOINT_STATE = "engine.json"
#: The folder a worker gives the service's run ``id`` under its runs root (the server reads its engine log there).
SERVICE_RUN_DIR = "run-{id}"
#: The engine's own log in a run directory, written by the worker's engine process.
ENGINE_LOG = "engine.log"
#: Sections that may differ when a run is resumed.
RESUME_MUTABLE = ("budget", "device", "threads", "sinks")


def service_run_dir(runs_root: Path, run_id: int) -> Path:
    """The run directory of the service's run ``run_id`` under a worker's ``runs_root``."""
    return runs_root / SERVICE_RUN_DIR.format(id=int(run_id))


def default_home() -> Path:
    """The scalerl home folder when ``SCALERL_HOME`` is not set: the service's database and credentials, the worker's
    run directories."""
    return Path.home() / ".scalerl"


class _Entry:
    """A read-only attribute of :class:`RunDir`: the path of one entry of the layout below the run's root."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: RunDir, owner: type[RunDir] | None = None) -> Path:
        return run.root / self.name


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory (nothing is created by reading them)."""

    root: Path

    config = _Entry(CONFIG_FILE)
    metrics = _Entry(METRICS_FILE)
    metrics_csv = _Entry(METRICS_CSV)
    status = _Entry(STATUS_FILE)
    checkpoints = _Entry(CHECKPOINTS)

    def holds_run(self) -> bool:
        """True when a run already wrote here (metrics or checkpoints): a fresh run must not use it."""
        return self.metrics.exists() or self.checkpoints.exists()


def latest_checkpoint(checkpoints: Path) -> Path | None:
    """The newest complete checkpoint directory under ``checkpoints``, or None."""
    pointer = checkpoints / LATEST
    if not pointer.is_file():
        return None
    path = checkpoints / pointer.read_text(encoding="utf-8").strip()
    return path if (path / CHECKPOINT_STATE).is_file() else None


def changed_on_resume(saved: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The sections of two canonical configs that differ and may not change on resume (empty: resumable)."""
    return sorted(k for k in saved.keys() | new.keys() if k not in RESUME_MUTABLE and saved.get(k) != new.get(k))
