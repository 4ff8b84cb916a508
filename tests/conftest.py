"""Test tiers: ``make test-fast`` (the edit loop) runs ``-m "not slow and not process and not browser"``; CI
(``make test``, ``.ci/run``) runs everything.

``process`` marks the tests that start processes or live servers (the engine's generator processes and collectives,
uvicorn, Celery workers, the CLI in a subprocess). They are listed here, in one place, so the fast lane's content
is visible at a glance; ``slow`` (long in-process tests) and ``browser`` (Chromium) stay on their own modules.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A Reporter left unfinished by a test is finished at interpreter exit, and one that cannot deliver keeps its points
# for `scalerl sync`: in a folder of the test session's own, never the user's ~/.scalerl/offline.
os.environ.setdefault("SCALERL_OFFLINE_DIR", tempfile.mkdtemp(prefix="scalerl-test-offline-"))

#: Directories and modules whose tests start processes or live servers (marked ``process``).
PROCESS = (
    "tests/rl_core/engine/",  # engine runs (generator processes, collectives), the GPU bench in a subprocess, uvicorn
    "tests/web/",  # a live uvicorn server per session (and Chromium)
    "tests/vllm/",  # the vLLM backend in its own virtualenv
    "tests/worker/test_faults.py",  # Celery workers, Redis, Postgres, engines killed mid-run
    "tests/worker/test_up.py",  # scalerl up: server and workers as processes
    "tests/client/test_client.py",  # live uvicorn
    "tests/server/http/test_hardening.py",  # live uvicorn
    "tests/integrations/test_cli.py",  # live uvicorn behind the CLI
    "tests/integrations/test_ci_wait.py",  # live uvicorn behind scalerl wait
    "tests/integrations/test_trl_callback.py",  # live uvicorn behind the TRL callback
    "tests/integrations/test_server_cmd.py",  # scalerl server in a subprocess
    "tests/client/test_process_end.py",  # training processes killed by signals
    "tests/client/test_server_delivers.py",  # live uvicorn delivering alerts
    "tests/scaling/test_cli.py",  # python -m scalerl.cli in a subprocess
)


#: The longest modules (seconds on 2 cores, 2026-11-27), collected first so that ``make test``'s workers
#: (``-n 2 --dist loadfile``: one module per worker at a time, in collection order) start them first and the run
#: does not end on one worker finishing a long module alone. Order only; every test is order-independent.
LONGEST_FIRST = (
    "tests/scaling/measure/test_replay.py",  # 165 s
    "tests/worker/test_faults.py",  # 126 s
    "tests/rl_core/engine/test_engine.py",  # 70 s
    "tests/rl_core/engine/test_gpu_bench.py",  # 63 s
    "tests/rl_core/engine/test_trainer_group.py",  # 61 s
    "tests/worker/test_up.py",  # 48 s
    "tests/rl_core/engine/test_weight_sync.py",  # 37 s
    "tests/rl_core/engine/test_side_by_side_bench.py",  # 36 s
    "tests/integrations/test_trl_callback.py",  # 31 s
    "tests/server/routes/test_openapi.py",  # 29 s
)


def _rank(rel: str) -> int:
    return LONGEST_FIRST.index(rel) if rel in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank: dict[int, int] = {}
    for item in items:
        rel = item.path.resolve().relative_to(ROOT).as_posix()
        if rel.startswith(PROCESS):
            item.add_marker(pytest.mark.process)
        rank[id(item)] = _rank(rel)
    items.sort(key=lambda item: rank[id(item)])  # stable: within a module, and among the rest, the order is unchanged
