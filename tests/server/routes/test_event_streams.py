"""Event streams at scale: one read per commit whatever the number of streams, coalesced writes, a slow client
that holds up nobody, the cap per token, and revocation that ends a token's streams at once."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import event, text

from server.runtime.context import ServiceContext
from server.store.events import emit
from tests.aio import run as run_coroutine
from tests.server.asgi_stream import StreamClient
from tests.server.conftest import Service
from tests.server.helpers import sweep_doc
from tests.server.live import served
from tests.server.routes.test_events import parse_sse


def _experiment(service: Service) -> int:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    return int(exp["id"])


def _commit(ctx: ServiceContext, experiment_id: int, n: int, pad: int = 0) -> None:
    """``n`` events in one transaction, then the wake-up that the routes send after a commit."""
    with ctx.sessions.begin() as session:
        for i in range(n):
            emit(session, experiment_id, "points", {"i": i, "pad": "x" * pad})
    ctx.notifier.notify()


def _ids(client: StreamClient) -> list[int]:
    return [e["id"] for e in parse_sse(client.body.decode())]


def _stored_ids(ctx: ServiceContext, experiment_id: int) -> list[int]:
    with ctx.engine.connect() as conn:
        rows = conn.execute(text("SELECT id FROM events WHERE experiment_id = :e ORDER BY id"), {"e": experiment_id})
        return [int(r[0]) for r in rows]


class EventReads:
    """SELECTs of the events table on ``ctx``'s engine."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.count = 0
        self._engine = ctx.engine
        event.listen(self._engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sql = " ".join(statement.lower().split())
        if sql.startswith("select") and " from events" in sql:
            self.count += 1

    def close(self) -> None:
        event.remove(self._engine, "before_cursor_execute", self._seen)


async def _until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_event_reads_per_commit_do_not_grow_with_the_number_of_streams(service: Service) -> None:
    """20 streams, each read at its own pace (as sockets do) and resumed from its own event id, while a client
    commits every 0.1 s: a commit costs at most 2 reads of the events table (the feed reads once for them all, at
    most every coalescing interval), and every stream gets every event once, in order."""
    exp_id = _experiment(service)
    _commit(service.ctx, exp_id, 40)
    history = _stored_ids(service.ctx, exp_id)
    commits, per_commit = 20, 5

    async def scenario() -> tuple[int, list[StreamClient], list[int]]:
        rng = random.Random(7)
        url = f"/api/v1/experiments/{exp_id}/events"
        cursors = [rng.choice([0, *history]) for _ in range(20)]
        streams = [
            StreamClient(service.client.app, url, {**service.read, "Last-Event-ID": str(c)}, pace=rng.uniform(0, 0.04))
            for c in cursors
        ]
        for s in streams:
            s.start()
        await _until(lambda: all(_ids(s)[-1:] == history[-1:] for s in streams))
        await asyncio.sleep(0.5)
        reads = EventReads(service.ctx)
        try:
            for _ in range(commits):
                await asyncio.to_thread(_commit, service.ctx, exp_id, per_commit)
                await asyncio.sleep(0.1)
            everything = _stored_ids(service.ctx, exp_id)
            await _until(lambda: all(_ids(s)[-1:] == everything[-1:] for s in streams))
            counted = reads.count
        finally:
            reads.close()
            for s in streams:
                await s.close()
        return counted, streams, [cursors[i] for i in range(len(streams))]

    reads, streams, cursors = run_coroutine(scenario())
    everything = _stored_ids(service.ctx, exp_id)
    for s, cursor in zip(streams, cursors, strict=True):
        assert _ids(s) == [i for i in everything if i > cursor], "each event once, in order, after the cursor"
    assert reads <= 2 * commits, f"{reads} reads of the events table for {commits} commits and 20 streams"


def test_streams_opened_one_after_another_read_the_history_once(service: Service) -> None:
    """20 streams opened one after another from the start of a 2,002-event history (4 full pages and a tail):
    the full pages are read once for all of them; each stream reads only the tail itself."""
    exp_id = _experiment(service)
    _commit(service.ctx, exp_id, 2000)
    everything = _stored_ids(service.ctx, exp_id)
    assert len(everything) == 2002

    async def scenario() -> tuple[int, list[StreamClient]]:
        reads = EventReads(service.ctx)
        streams = []
        try:
            for _ in range(20):
                s = StreamClient(service.client.app, f"/api/v1/experiments/{exp_id}/events", service.read).start()
                streams.append(s)
                await _until(lambda: _ids(s)[-1:] == everything[-1:])  # noqa: B023
            counted = reads.count
        finally:
            reads.close()
            for s in streams:
                await s.close()
        return counted, streams

    reads, streams = run_coroutine(scenario())
    assert all(_ids(s) == everything for s in streams)
    assert reads <= 4 + 20 + 2, f"{reads} reads of the events table (4 full pages, 20 streams)"


def test_a_slow_client_holds_up_no_other_and_catches_up(service: Service) -> None:
    """One client stops reading: the other gets each commit's events at once, in one write per wake (not one per
    event); the slow one, once it reads again, gets every event exactly once."""
    exp_id = _experiment(service)
    base = _stored_ids(service.ctx, exp_id)[-1]

    async def scenario() -> tuple[StreamClient, StreamClient, list[float]]:
        url = f"/api/v1/experiments/{exp_id}/events"
        headers = {**service.read, "Last-Event-ID": str(base)}
        fast = StreamClient(service.client.app, url, headers).start()
        slow = StreamClient(service.client.app, url, headers).start()
        assert await fast.opened() == 200 and await slow.opened() == 200
        await asyncio.sleep(0.3)
        slow.reading.clear()  # from here on the server's writes to it wait, as on a full socket
        delays = []
        for _ in range(12):  # 12 x 10 events of 8 KB: more than a stream may hold pending
            before = len(fast.chunks)
            t0 = time.perf_counter()
            await asyncio.to_thread(_commit, service.ctx, exp_id, 10, 8000)
            await _until(lambda: len(fast.chunks) > before, timeout=5)  # noqa: B023
            delays.append(fast.chunks[-1][0] - t0)
            await asyncio.sleep(0.05)
        slow.reading.set()
        everything = _stored_ids(service.ctx, exp_id)
        await _until(lambda: _ids(slow)[-1:] == everything[-1:] and _ids(fast)[-1:] == everything[-1:])
        await asyncio.to_thread(_commit, service.ctx, exp_id, 2)  # the slow one is back on the feed
        last = _stored_ids(service.ctx, exp_id)[-1]
        await _until(lambda: _ids(slow)[-1:] == [last] and _ids(fast)[-1:] == [last])
        await fast.close()
        await slow.close()
        return fast, slow, delays

    fast, slow, delays = run_coroutine(scenario())
    expected = [i for i in _stored_ids(service.ctx, exp_id) if i > base]
    assert _ids(fast) == expected and _ids(slow) == expected
    assert max(delays) < 1.5, delays  # the coalescing interval, never the slow client's pace
    assert len(fast.chunks) <= 12 + 2, f"{len(fast.chunks)} writes for 13 commits of 122 events"


def test_the_cap_per_token(service: Service) -> None:
    """The 65th open stream of one token is a 429 that names the cap and how to raise it; another token still
    opens one; a closed stream gives its place back."""
    exp_id = _experiment(service)
    limit = service.ctx.settings.max_streams_per_token
    assert limit == 64

    async def scenario() -> None:
        url = f"/api/v1/experiments/{exp_id}/events"
        streams = [StreamClient(service.client.app, url, service.read).start() for _ in range(limit)]
        assert [await s.opened() for s in streams] == [200] * limit
        extra = StreamClient(service.client.app, url, service.read).start()
        assert await extra.opened() == 429
        await asyncio.wait_for(extra.ended.wait(), 5)
        detail = parse_json(extra.body)["detail"]
        assert "64" in detail and "SCALERL_MAX_STREAMS_PER_TOKEN" in detail, detail
        other = StreamClient(service.client.app, url, service.write).start()  # write implies read
        assert await other.opened() == 200
        await streams[0].close()
        again = StreamClient(service.client.app, url, service.read).start()
        assert await again.opened() == 200
        for s in [*streams[1:], other, again]:
            await s.close()

    run_coroutine(scenario())


def parse_json(body: bytes) -> dict[str, Any]:
    import json

    value: dict[str, Any] = json.loads(body)
    return value


def _listen(url: str, headers: dict[str, str], opened: threading.Event, out: dict[str, float]) -> None:
    with httpx.Client(timeout=30) as c, c.stream("GET", url, headers=headers) as r:
        out["status"] = r.status_code
        opened.set()
        for _ in r.iter_raw():
            pass
    out["ended"] = time.perf_counter()


def _viewer_token(service: Service, base: str) -> dict[str, Any]:
    """A new read-only token, as the API answers it (``id``, ``token``, ...)."""
    made = httpx.post(f"{base}/api/v1/tokens", json={"name": "viewer", "scopes": ["read"]}, headers=service.admin)
    assert made.status_code in (200, 201), made.text
    return dict(made.json())


def _open_stream(base: str, exp_id: int, token: str) -> tuple[threading.Thread, dict[str, float]]:
    """An experiment's event stream read by ``token`` in a thread, open (status 200) and idle for 0.5 s; the dict
    gets ``ended`` (``time.perf_counter()``) when the server ends it."""
    opened, out = threading.Event(), dict[str, float]()
    listener = threading.Thread(
        target=_listen,
        args=(f"{base}/api/v1/experiments/{exp_id}/events", {"Authorization": f"Bearer {token}"}),
        kwargs={"opened": opened, "out": out},
        daemon=True,
    )
    listener.start()
    assert opened.wait(10) and out["status"] == 200
    time.sleep(0.5)  # the stream waits on its feed
    return listener, out


def test_revoking_a_token_ends_its_streams_at_once(database_url: str, tmp_path: Path) -> None:
    """From the DELETE's answer to the end of the token's open stream: under 0.1 s (the periodic check alone would
    take up to ``sse_poll_seconds``, 5 s here)."""
    with served(database_url, tmp_path, sse_poll_seconds=5.0) as (service, base):
        exp_id = _experiment(service)
        token = _viewer_token(service, base)
        listener, out = _open_stream(base, exp_id, token["token"])
        r = httpx.delete(f"{base}/api/v1/tokens/{token['id']}", headers=service.admin)
        answered = time.perf_counter()
        assert r.status_code == 200
        listener.join(10)
        assert "ended" in out
        assert out["ended"] - answered < 0.1, f"the stream ended {out['ended'] - answered:.3f} s after the DELETE"


def test_a_token_revoked_elsewhere_ends_its_streams_within_the_poll(database_url: str, tmp_path: Path) -> None:
    """Another process revoked the token (its row changed, no signal here): the stream ends within about
    ``sse_poll_seconds``."""
    with served(database_url, tmp_path, sse_poll_seconds=0.3) as (service, base):
        exp_id = _experiment(service)
        token = _viewer_token(service, base)
        listener, out = _open_stream(base, exp_id, token["token"])
        with service.ctx.engine.begin() as conn:
            conn.execute(text("UPDATE api_tokens SET revoked_at = CURRENT_TIMESTAMP WHERE id = :i"), {"i": token["id"]})
        revoked = time.perf_counter()
        listener.join(10)
        assert "ended" in out and out["ended"] - revoked < 3.0, out
