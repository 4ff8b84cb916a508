"""The environment of a child process a test starts, and the engine processes a test's runs started."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: torch.distributed's launcher variables. An in-process DeepSpeed test sets them and keeps its process group (and
#: its port) for the rest of the pytest worker; a trainer started later as a child would inherit them and try to
#: bind that port (accelerate's PartialState failed with EADDRINUSE in CI).
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without the launcher variables, with ``extra`` set."""
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_ENV}
    env.update(extra)
    return env


def engine_pids(runs_dir: Path, run_id: int) -> list[int]:
    """The engine processes of run ``run_id`` under this test's ``runs_dir`` (never another test's, a demo's or a
    container's engine of a run with the same id: the pattern holds the test's own folder)."""
    pattern = f"worker.engine_process .* --out {runs_dir}/run-{run_id} "
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split()]
