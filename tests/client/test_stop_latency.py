"""With the Reporter's *default* settings, a loop that logs every step learns of a stop within
``flush_interval`` plus one step (it used to wait for ``poll_interval``, 30 s, because ``log()`` woke the thread only
at ``batch_size`` points)."""

from __future__ import annotations

import time

from scalerl.client import Client, Reporter
from tests.client.conftest import Service


def test_stop_reaches_a_loop_with_default_settings_within_flush_interval(service: Service) -> None:
    rep = Reporter.start("latency", url=service.url, token=service.token)  # defaults: flush 2 s
    run_id = rep.wait_for_run(15.0)
    assert run_id is not None
    step_seconds = 0.05
    stop_at: float | None = None
    stopped_after: float | None = None
    for step in range(1, 2000):
        rep.log(step, 0.01 * step, 0.1 if step % 10 == 0 else None)
        if step == 20:
            with Client(service.url, service.token) as api:
                api.stop_run(run_id, "latency test")
            stop_at = time.monotonic()
        if rep.should_stop:
            assert stop_at is not None
            stopped_after = time.monotonic() - stop_at
            break
        time.sleep(step_seconds)
        if stop_at is not None and time.monotonic() - stop_at > 15.0:
            break
    rep.finish()
    assert stopped_after is not None, "the stop never reached the loop within 15 s"
    assert stopped_after <= rep.flush_interval + step_seconds + 1.0, stopped_after


def test_a_first_point_leaves_within_flush_interval(service: Service) -> None:
    rep = Reporter.start("first-point", url=service.url, token=service.token)
    assert rep.wait_for_run(15.0) is not None
    time.sleep(0.5)
    t0 = time.monotonic()
    rep.log(1, 0.1, 0.2)
    while rep.delivered < 1 and time.monotonic() - t0 < 15.0:
        time.sleep(0.02)
    assert rep.delivered == 1 and time.monotonic() - t0 <= rep.flush_interval + 1.0
    rep.finish()
