"""The database reads of event streams, shared and apart from the worker-thread pool (issue 49 item 10).

Invariants: every read runs in an executor of its own (:data:`WORKERS` threads), never in the pool that ingestion
and every other endpoint share, so open streams cannot take the threads a POST needs; streams that ask the same
read at the same time (the next page after the same event id of the same experiment, the same token) share one
query and its answer (single flight), so a commit that wakes 200 streams costs two queries, not 400; a token is
still checked at every wake-up (a revoked token's streams get nothing more). Keys are per event loop: a future is
never awaited from another loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

WORKERS = 2

_executor = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="scalerl-sse")
_flights: dict[tuple[int, Hashable], asyncio.Future[Any]] = {}


async def shared(key: Hashable, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in the streams' executor; callers with an equal ``key`` while it runs get the same answer."""
    loop = asyncio.get_running_loop()
    slot = (id(loop), key)
    flight = _flights.get(slot)
    if flight is None:
        flight = asyncio.ensure_future(loop.run_in_executor(_executor, fn, *args))
        _flights[slot] = flight
        flight.add_done_callback(lambda _: _flights.pop(slot, None))
    result: T = await asyncio.shield(flight)
    return result


async def token_still_valid(secret: str, check: Callable[[str], bool]) -> bool:
    """``check(secret)`` on every wake-up (a revoked token's streams get nothing more), shared by the streams of
    that token woken together."""
    return await shared(("token", secret), check, secret)
