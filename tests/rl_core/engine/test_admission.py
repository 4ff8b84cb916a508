"""The admission (staleness) controller: capacity per mode, thread safety, blocking and closing."""

from __future__ import annotations

import threading
import time

import pytest

from rl_core.engine.admission import AdmissionController, AdmissionPolicy
from rl_core.recipe import Recipe, apply_overrides


def test_capacity_per_mode() -> None:
    assert [AdmissionPolicy("sync", 1).capacity(r) for r in range(4)] == [1, 2, 3, 4]
    assert [AdmissionPolicy("pipeline", 8).capacity(r) for r in range(3)] == [9, 10, 11]
    ppo = AdmissionPolicy("ppo_off_policy", 4)
    assert [ppo.capacity(r) for r in range(9)] == [4, 4, 4, 4, 8, 8, 8, 8, 12]
    assert AdmissionPolicy.from_config(apply_overrides(Recipe(), {"pipeline.mode": "sync"}).pipeline).k == 1
    assert AdmissionPolicy("pipeline", 8).refresh == "inflight"
    assert AdmissionPolicy("ppo_off_policy", 4).refresh_period == 4
    with pytest.raises(ValueError):
        AdmissionPolicy("pipeline", 0)


@pytest.mark.parametrize(("mode", "k"), [("sync", 1), ("pipeline", 3), ("ppo_off_policy", 2)])
def test_simulated_staleness_is_bounded(mode: str, k: int) -> None:
    """Trainer consumes batch s at version s; the generator starts each batch at the version current when it
    was admitted. Staleness never exceeds the policy's bound."""
    ctl = AdmissionController(AdmissionPolicy(mode, k))  # type: ignore[arg-type]
    started_at: dict[int, int] = {}
    for step in range(20):
        version = step  # the trainer's version when it consumes batch `step`
        while (b := ctl.try_admit()) is not None:
            started_at[b] = version
        assert step in started_at
        assert version - started_at[step] <= ctl.policy.max_staleness
        ctl.retire()
        assert ctl.issued <= ctl.policy.capacity(ctl.retired)


def test_blocking_admit_wakes_on_retire_and_close() -> None:
    ctl = AdmissionController(AdmissionPolicy("sync", 1))
    assert ctl.admit(timeout=0.1) == 0
    assert ctl.admit(timeout=0.05) is None  # at capacity
    got: list[int | None] = []
    t = threading.Thread(target=lambda: got.append(ctl.admit(timeout=5)))
    t.start()
    time.sleep(0.05)
    ctl.retire()
    t.join(2)
    assert got == [1]
    t2 = threading.Thread(target=lambda: got.append(ctl.admit(timeout=5)))
    t2.start()
    ctl.close()
    t2.join(2)
    assert got == [1, None]
    with pytest.raises(ValueError):
        ctl.retire(5)


def test_thread_safety_under_contention() -> None:
    ctl = AdmissionController(AdmissionPolicy("pipeline", 2))
    issued: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def producer() -> None:
        while not stop.is_set():
            b = ctl.admit(timeout=0.01)
            if b is not None:
                with lock:
                    issued.append(b)

    def consumer() -> None:
        for _ in range(300):
            while ctl.in_flight == 0:
                time.sleep(0)
            ctl.retire()
            assert ctl.issued <= ctl.policy.capacity(ctl.retired)

    threads = [threading.Thread(target=producer) for _ in range(3)]
    for t in threads:
        t.start()
    consumer()
    stop.set()
    for t in threads:
        t.join(2)
    assert sorted(issued) == list(range(len(issued)))  # every index handed out exactly once
    assert ctl.retired == 300 and ctl.issued <= 300 + 3
