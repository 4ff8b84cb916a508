"""A JSON 503 with ``Retry-After`` (the database restarting) sets how long every client waits, capped
by its own ``max_backoff``: the engine's HttpReporter (against a tiny local server), and scalerl.client's Client
with its one retry policy, which the Reporter, the worker and the CLI share (mocked transports)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

import scalerl.client.retry
from rl_core.contracts.retry import retry_after
from rl_core.engine.sinks import HttpReporter
from scalerl.cli.waiting import Patient
from scalerl.client import Client
from scalerl.client.api import ServiceUnavailable
from scalerl.client.reporter import Reporter
from scalerl.client.retry import Backoff, retrying
from tests.support.http import Reply, Request, json_reply, local_service
from worker.executor import retry


@contextmanager
def busy_then_ok(busy: int, header: str | None) -> Iterator[str]:
    """A local server answering ``busy`` 503s (with ``Retry-After: header``) and then 200."""
    left = {"n": busy}

    def answer(_: Request) -> Reply:
        left["n"] -= 1
        if left["n"] >= 0:
            return json_reply(503, {"detail": "database unavailable"}, {"Retry-After": header} if header else None)
        return json_reply(200, {"action": "continue"})

    with local_service(answer) as url:
        yield url


@pytest.mark.parametrize(("header", "expected"), [("7", [7.0, 7.0]), ("600", [30.0, 30.0]), (None, [0.5, 1.0])])
def test_http_reporter_waits_as_long_as_retry_after_says_capped(header: str | None, expected: list[float]) -> None:
    slept: list[float] = []
    with busy_then_ok(2, header) as url:
        reporter = HttpReporter(url, 1, "t", backoff=0.5, max_backoff=30.0, sleep=slept.append)
        assert reporter._request("/api/v1/runs/1/metrics", {"points": []}) == {"action": "continue"}
    assert slept == expected


def test_retry_after_parses_seconds_and_http_dates() -> None:
    assert retry_after("5") == 5.0 and retry_after(" 2.5 ") == 2.5 and retry_after("-3") == 0.0
    assert retry_after(None) is None and retry_after("soon") is None and retry_after("nan") is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=40), usegmt=True)
    assert 35 <= (retry_after(later) or 0) <= 41


def _busy(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503, json={"detail": "database unavailable"}, headers={"Retry-After": "9"})


def test_client_and_reporter_honour_retry_after() -> None:
    client = Client("http://127.0.0.1:1", "t", transport=httpx.MockTransport(_busy))
    with pytest.raises(ServiceUnavailable) as info:
        client.request("GET", "/api/v1/runs/1")
    assert info.value.retry_after == 9.0
    reporter = Reporter(client, run_id=1, backoff=0.5, max_backoff=60.0)
    before = time.monotonic()
    reporter._unreachable(info.value)  # first failure: own back-off 0.5 s, the service asked for 9 s
    assert 8.5 <= reporter._backoff.next_at - before <= 9.5
    capped = Reporter(client, run_id=1, backoff=0.5, max_backoff=4.0)
    capped._unreachable(ServiceUnavailable("busy", retry_after=3600.0))
    assert capped._backoff.next_at - time.monotonic() <= 4.0
    client.close()


def test_the_workers_lease_calls_and_backoff_honour_retry_after() -> None:
    worker = Client("http://127.0.0.1:1", "t", transport=httpx.MockTransport(_busy), from_environment=False)
    with pytest.raises(ServiceUnavailable) as info:
        worker.claim_run("w", 60.0)
    assert info.value.retry_after == 9.0
    worker.close()
    b = Backoff(cap=5.0)
    b.fail(100.0, info.value.retry_after)
    assert b.next_at == 105.0  # capped
    b = Backoff(cap=30.0)
    b.fail(100.0, info.value.retry_after)
    assert b.next_at == 109.0
    b.fail(200.0, None)
    assert b.next_at == 201.0  # own back-off when no header


def _flaky(ok: dict[str, Any], headers: list[str | None], seen: list[str]) -> httpx.MockTransport:
    """503s with these ``Retry-After`` headers (None: no header), then ``ok`` to every request."""
    left = list(headers)

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        if left:
            header = left.pop(0)
            return httpx.Response(
                503, json={"detail": "busy"}, headers={} if header is None else {"Retry-After": header}
            )
        return httpx.Response(200, json=ok)

    return httpx.MockTransport(answer)


OUTAGE = [None, "7", None]  # three 503s: the second asks for 7 s


def test_cli_worker_and_reporter_wait_by_the_one_retry_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CLI's wait, the worker's retry and the Reporter's thread all ask ``scalerl.client.retry`` how long to
    wait, with the same failures counted and the service's Retry-After passed on: replacing the policy there changes
    all three."""
    asked: list[tuple[int, float | None]] = []

    def policy(failures: int, base: float, cap: float, hint: float | None = None) -> float:
        asked.append((failures, hint))
        return 0.01

    monkeypatch.setattr(scalerl.client.retry, "backoff_delay", policy)
    expected = [(1, None), (2, 7.0), (3, None)]

    seen: list[str] = []  # the worker claims a run through a short outage
    lease = {"run": {"id": 1}, "lease_id": "l", "lease_expires_at": "2026-01-01T00:00:00Z"}
    with Client("http://svc", "t", transport=_flaky(lease, OUTAGE, seen), from_environment=False) as worker:
        assert retry(lambda: worker.claim_run("w", 60.0), time.monotonic() + 60, 30.0) == lease
    assert asked == expected and seen == ["POST /api/v1/runs/claim"] * 4

    asked.clear()  # `scalerl wait` reads a verdict through the same outage
    seen.clear()
    verdict = {"decided": True, "finished": True}
    slept: list[float] = []
    with Client("http://svc", "t", transport=_flaky(verdict, OUTAGE, seen)) as cli:
        assert Patient(60.0, lambda _: None, sleep=slept.append).call(lambda: cli.verdict(3)) == verdict
    assert asked == expected and slept == [0.01] * 3 and seen == ["GET /api/v1/experiments/3/verdict"] * 4

    asked.clear()  # a training loop's Reporter sends its points through it
    seen.clear()
    stored = {"run_id": 1, "accepted": 1, "duplicates": 0, "rejected": [], "status": "running", "action": "stop"}
    client = Client("http://svc", "t", transport=_flaky(stored, OUTAGE, seen))
    rep = Reporter(client, run_id=1, flush_interval=0.01, poll_interval=60.0, handle_signals=False,
                   offline_dir=tmp_path)  # fmt: skip
    rep.log(0, 0.0, 0.1)
    assert rep.close(timeout=10.0) and rep.delivered == 1 and rep.should_stop
    assert asked == expected and seen == ["POST /api/v1/runs/1/metrics"] * 4
    client.close()


def test_retrying_gives_up_when_the_next_try_would_pass_the_deadline() -> None:
    calls: list[float] = []
    now = [0.0]

    def down() -> None:
        calls.append(now[0])
        raise ServiceUnavailable("down", retry_after=None)

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(ServiceUnavailable):
        retrying(down, Backoff(cap=4.0), 5.0, sleep=sleep, clock=lambda: now[0])
    assert calls == [0.0, 0.5, 1.5, 3.5]  # the next try (7.5) would be past the deadline


def test_a_429_on_a_leased_metrics_post_carries_its_retry_after() -> None:
    body = json.dumps({"detail": "busy"}).encode()
    client = Client("http://svc", "t", transport=httpx.MockTransport(
        lambda r: httpx.Response(429, content=body, headers={"Retry-After": "3"})))  # fmt: skip
    with pytest.raises(ServiceUnavailable) as info:
        client.post_points(1, [], lease_id="l")
    assert info.value.retry_after == 3.0
    client.close()
