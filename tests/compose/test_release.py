"""The worker's side of a `docker compose down`: a worker shutting down reports its run ``lost`` (the release, so the
run resumes at once instead of after its lease) and keeps retrying it for ``drain_seconds`` while the API answers
503, instead of a fixed 15 s (the stack runs it for real in ``make compose-test``, tests/compose/stack.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from scalerl.client.api import ServiceUnavailable
from worker.executor import Attempt, RunExecutor
from worker.settings import WorkerSettings


class FlakyApi:
    """``report_status`` answers 503 (``ServiceUnavailable`` with ``Retry-After``) for ``down_for`` seconds."""

    def __init__(self, down_for: float) -> None:
        self.until = time.monotonic() + down_for
        self.calls: list[tuple[int, str, str, str | None, bool]] = []
        self.refused = 0

    def report_status(
        self, run_id: int, status: str, reason: str, *, lease_id: str | None = None, release: bool = False
    ) -> dict[str, Any]:
        if time.monotonic() < self.until:
            self.refused += 1
            raise ServiceUnavailable("POST /runs/7/status: 503 database unavailable", retry_after=0.05)
        self.calls.append((run_id, status, reason, lease_id, release))
        return {"id": run_id, "status": status}


def shutting_down(tmp_path: Path, drain_seconds: float, api: FlakyApi) -> tuple[RunExecutor, Attempt]:
    settings = WorkerSettings(home=tmp_path, drain_seconds=drain_seconds, max_backoff_seconds=0.1)
    shutdown = threading.Event()
    shutdown.set()
    executor = RunExecutor(settings, api, shutdown)  # type: ignore[arg-type]
    attempt = Attempt(run={"id": 7, "name": "r"}, lease_id="lease", run_dir=tmp_path, acked_step=40)
    attempt.stop = "shutdown"
    return executor, attempt


def test_a_release_answered_503_is_retried_until_the_api_takes_it(tmp_path: Path) -> None:
    api = FlakyApi(down_for=1.5)
    executor, attempt = shutting_down(tmp_path, drain_seconds=5.0, api=api)
    t0 = time.monotonic()
    reason = "worker w shut down at step 40; the run resumes from its last checkpoint"
    executor._finish(attempt, "lost", reason, release=True)
    assert api.refused >= 5 and len(api.calls) == 1, (api.refused, api.calls)
    (call,) = api.calls
    assert call[:2] == (7, "lost") and call[3] == "lease" and call[4] and attempt.reporting
    assert 1.5 <= time.monotonic() - t0 < 3.0


def test_a_release_is_retried_for_drain_seconds_then_left_to_the_lease(tmp_path: Path) -> None:
    """The budget is the worker's drain time (here 1 s; a shutdown had 15 s whatever the setting), and the
    container's stop_grace_period bounds it from outside."""
    api = FlakyApi(down_for=60.0)
    executor, attempt = shutting_down(tmp_path, drain_seconds=1.0, api=api)
    t0 = time.monotonic()
    executor._finish(attempt, "lost", "worker w shut down at step 40")
    took = time.monotonic() - t0
    assert api.calls == [] and api.refused >= 3 and 0.8 <= took < 2.0, (api.refused, took)
