"""The refit queue: a key's work starts at most once every ``min_seconds``, also when it is submitted while its
work runs (CI failed on a machine up for over an hour: the first run's time was not yet recorded, so a submit
during it compared against monotonic time 0 and was due at once)."""

from __future__ import annotations

import threading
import time

from server.assess.background import IntervalRefitter


def test_a_key_submitted_while_its_work_runs_waits_min_seconds_from_the_start() -> None:
    started: list[float] = []
    release = threading.Event()

    def work(_key: int) -> None:
        started.append(time.monotonic())
        release.wait(5)

    refitter = IntervalRefitter(work, min_seconds=3600.0)
    refitter.start()
    try:
        refitter.submit(1)
        deadline = time.monotonic() + 5
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(started) == 1
        for _ in range(5):  # batches arriving while the first refit runs coalesce into one, an hour later
            refitter.submit(1)
        release.set()
        time.sleep(0.3)
        assert len(started) == 1
        assert refitter.drain(5)  # drain makes it due now: exactly one more
        assert len(started) == 2
    finally:
        refitter.stop()


def test_other_keys_are_not_held_back() -> None:
    seen: list[int] = []
    refitter = IntervalRefitter(seen.append, min_seconds=3600.0)
    refitter.start()
    try:
        for key in (1, 2, 3):
            refitter.submit(key)
        deadline = time.monotonic() + 5
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(seen) == [1, 2, 3]
    finally:
        refitter.stop()
