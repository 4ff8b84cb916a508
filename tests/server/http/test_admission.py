"""Write admission: idle or slow sockets hold no write slot, heads and bodies arrive on a deadline, slots are shared
fairly, and heartbeats are never shed behind ingestion (real sockets against a real server where it matters)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from server.http.slots import Slots
from tests.aio import run as run_coroutine
from tests.server.conftest import Service
from tests.server.live import hold_write_lock, make_runs, sqlite_served

# ---- the slots ------------------------------------------------------------------------------------------------------


def test_a_key_at_its_share_lets_another_key_pass_it() -> None:
    async def scenario() -> list[str]:
        slots = Slots(2, per_key=1, wait=5.0)
        order: list[str] = []
        assert await slots.acquire("run:a")

        async def take(key: str) -> None:
            assert await slots.acquire(key)
            order.append(key)

        second_a = asyncio.create_task(take("run:a"))  # waits: run a holds its share
        await asyncio.sleep(0.01)
        b = asyncio.create_task(take("run:b"))  # arrived later, but its share is free
        await asyncio.sleep(0.01)
        assert order == ["run:b"] and slots.busy == 2
        slots.release("run:a", 0.01)
        await asyncio.gather(second_a, b)
        return order

    assert run_coroutine(scenario()) == ["run:b", "run:a"]


def test_waiters_are_served_in_order_and_give_up_after_the_wait() -> None:
    async def scenario() -> None:
        slots = Slots(1, wait=0.2)
        assert await slots.acquire("k0")
        granted: list[str] = []

        async def take(key: str) -> None:
            if await slots.acquire(key):
                granted.append(key)

        tasks = [asyncio.create_task(take(f"k{i}")) for i in (1, 2)]
        await asyncio.sleep(0.01)
        slots.release("k0", 0.001)
        await asyncio.sleep(0.01)
        assert granted == ["k1"]
        t0 = time.perf_counter()
        await asyncio.gather(*tasks)  # k2 waits its 0.2 s behind k1, which never releases
        assert granted == ["k1"] and 0.15 < time.perf_counter() - t0 < 1.0 and slots.shed == 1
        assert not slots.waiting and slots.busy == 1

    run_coroutine(scenario())


def test_a_full_queue_turns_writes_away_at_once_with_the_drain_time() -> None:
    async def scenario() -> None:
        slots = Slots(1, wait=5.0, max_waiting=1)
        slots.pace = 3.0  # each write holds its slot 3 s
        assert await slots.acquire("a")
        queued = asyncio.create_task(slots.acquire("b"))
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        assert not await slots.acquire("c")
        assert time.perf_counter() - t0 < 0.05 and slots.retry_after() == 6  # a's rest and b's turn
        queued.cancel()

    run_coroutine(scenario())


def test_a_lane_without_a_wait_never_sheds() -> None:
    async def scenario() -> None:
        slots = Slots(1, wait=None)
        slots.pace = 100.0
        assert await slots.acquire("a")
        waiter = asyncio.create_task(slots.acquire("b"))
        await asyncio.sleep(0.3)
        assert not waiter.done()
        slots.release("a", 0.3)
        assert await waiter

    run_coroutine(scenario())


def test_a_granted_waiter_whose_request_is_gone_hands_its_slot_on() -> None:
    async def scenario() -> None:
        slots = Slots(1, wait=5.0)
        assert await slots.acquire("a")
        gone = asyncio.create_task(slots.acquire("b"))
        nxt = asyncio.create_task(slots.acquire("c"))
        await asyncio.sleep(0.01)
        gone.cancel()
        slots.release("a", 0.01)
        await asyncio.sleep(0.01)
        assert await nxt and slots.busy == 1 and slots.held == {"c": 1}

    run_coroutine(scenario())


# ---- real sockets ---------------------------------------------------------------------------------------------------


def _open_head(url: str, path: str, token: str | None, length: int = 1000) -> socket.socket:
    """A socket that sends a write's head (with a Content-Length) and then nothing."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
    sock.sendall(f"{head}Content-Length: {length}\r\n\r\n".encode())
    return sock


def _answer(sock: socket.socket, timeout: float) -> tuple[int, bytes, bool]:
    """(status, whole answer, whether the server closed the socket after it) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    data = b""
    closed = False
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            data += chunk
    except TimeoutError:
        pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data, closed


def test_idle_sockets_without_a_token_or_with_any_token_hold_no_write_slot(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """Eight idle heads per kind (none, garbage, valid token) against a limit of 2: every legitimate write is still
    answered at once; the tokenless and garbage ones are refused from their head, the valid ones after the body
    deadline, and each socket is closed."""
    with sqlite_served(tmp_path, sqlite_template, max_inflight_writes=2, body_timeout_seconds=2.0) as (
        service,
        url,
        _,
    ):
        run = httpx.post(f"{url}/api/v1/runs", json={"name": "r"}, headers=service.write).json()["id"]
        path = f"/api/v1/runs/{run}/metrics"
        valid = service.write["Authorization"].removeprefix("Bearer ")
        kinds = {"none": None, "garbage": "srl_" + "x" * 40, "valid": valid}
        sockets = {kind: [_open_head(url, path, token) for _ in range(8)] for kind, token in kinds.items()}
        time.sleep(0.3)
        times = []
        with httpx.Client(timeout=30) as c:
            for step in range(10):
                t = time.perf_counter()
                r = c.post(url + path, json={"points": [{"step": step, "compute": step + 1.0}]}, headers=service.write)
                times.append(time.perf_counter() - t)
                assert r.status_code == 200, r.text
        assert max(times) < 1.0, times
        for kind in ("none", "garbage"):
            for sock in sockets[kind]:
                status, data, closed = _answer(sock, 2.0)
                assert status == 401 and b"token" in data and closed, (kind, data)
        for sock in sockets["valid"]:
            status, data, closed = _answer(sock, 4.0)
            assert status == 408 and b"did not arrive" in data and closed, data
        for socks in sockets.values():
            for sock in socks:
                sock.close()
        assert httpx.get(f"{url}/api/v1/runs/{run}", headers=service.read).json()["n_points"] == 10


def test_a_head_that_never_ends_is_answered_408_and_closed(tmp_path: Path, sqlite_template: Path) -> None:
    with sqlite_served(tmp_path, sqlite_template, header_timeout_seconds=0.5) as (_, url, _db):
        host, port = url.removeprefix("http://").split(":")
        silent = socket.create_connection((host, int(port)))
        partial = socket.create_connection((host, int(port)))
        partial.sendall(b"POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        t0 = time.perf_counter()
        for sock in (silent, partial):
            status, data, closed = _answer(sock, 3.0)
            assert status == 408 and closed, data
            sock.close()
        assert time.perf_counter() - t0 < 2.5
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_a_body_slower_than_the_minimum_rate_is_answered_408(tmp_path: Path, sqlite_template: Path) -> None:
    with sqlite_served(tmp_path, sqlite_template, body_timeout_seconds=0.5, min_body_rate=1024) as (
        service,
        url,
        _,
    ):
        token = service.write["Authorization"].removeprefix("Bearer ")
        sock = _open_head(url, "/api/v1/runs", token, length=100)
        sock.sendall(b'{"name": ')  # then nothing: 100 bytes were due within 0.5 s + 100/1024 s
        status, data, closed = _answer(sock, 3.0)
        assert status == 408 and closed, data
        sock.close()


def test_heartbeats_are_never_shed_behind_ingestion(tmp_path: Path, sqlite_template: Path) -> None:
    """Every write slot is taken (the database's write lock is held) and more ingestion is shed; a heartbeat waits
    in its own lane instead and is answered once the lock is free."""
    with sqlite_served(tmp_path, sqlite_template, max_inflight_writes=1, write_queue_seconds=0) as (
        service,
        url,
        db,
    ):
        runs = make_runs(service, url, 2)
        raw = hold_write_lock(db)
        answers: dict[str, httpx.Response] = {}

        def post(name: str, path: str, body: dict[str, object]) -> None:
            answers[name] = httpx.post(url + path, json=body, headers=service.write, timeout=60)

        point = {"points": [{"step": 0, "compute": 1.0}]}
        holder = threading.Thread(target=post, args=("holder", f"/api/v1/runs/{runs[0]}/metrics", point))
        holder.start()
        time.sleep(0.3)
        post("shed", f"/api/v1/runs/{runs[1]}/metrics", point)
        assert answers["shed"].status_code == 503
        beat = threading.Thread(
            target=post, args=("heartbeat", f"/api/v1/runs/{runs[1]}/heartbeat", {"heartbeat_seconds": 10})
        )
        beat.start()
        time.sleep(1.0)
        assert "heartbeat" not in answers  # waiting for the lock, not shed
        raw.execute("ROLLBACK")
        raw.close()
        beat.join(30)
        holder.join(30)
        assert answers["heartbeat"].status_code == 200, answers["heartbeat"].text
        assert answers["holder"].status_code == 200


@pytest.mark.parametrize("kind", ["none", "garbage", "read-only"])
def test_a_refused_write_is_answered_from_its_head(service: Service, kind: str) -> None:
    """The same answers as the routes give: 401 without a token or with an unknown one, 403 without the scope."""
    headers = {"none": {}, "garbage": {"Authorization": "Bearer srl_nope"}, "read-only": service.read}[kind]
    r = service.client.post("/api/v1/runs", json={"name": "x"}, headers=headers)
    assert r.status_code == (403 if kind == "read-only" else 401), r.text
    assert "token" in r.json()["detail"]
    if r.status_code == 401:
        assert r.headers["www-authenticate"] == "Bearer"
