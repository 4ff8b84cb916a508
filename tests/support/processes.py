"""The environment of a child process a test starts."""

from __future__ import annotations

import os

#: torch.distributed's launcher variables. An in-process DeepSpeed test sets them and keeps its process group (and
#: its port) for the rest of the pytest worker; a trainer started later as a child would inherit them and try to
#: bind that port (accelerate's PartialState failed with EADDRINUSE in CI).
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without the launcher variables, with ``extra`` set."""
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_ENV}
    env.update(extra)
    return env
