"""A bounded executor for CPU-bound request parsing (YAML and large JSON bodies), apart from the shared thread pool.

Invariants: at most ``workers`` bodies are parsed at once and at most ``queue`` more wait; a body beyond that is
refused at once with :class:`~server.http.errors.Overloaded` (a JSON 503 with ``Retry-After``), so a burst of bodies can
neither take the worker threads that every other endpoint shares nor hold more than ``workers + queue`` parsed
documents in memory. A slot is freed when the parse ends, not when its request is cancelled (a client that hangs
up does not let more work in than the bound).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from server.http.errors import Overloaded

T = TypeVar("T")


class ParsePool:
    def __init__(self, workers: int = 1, queue: int = 8) -> None:
        self.workers, self.queue = workers, queue
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scalerl-parse")
        self._slots = threading.BoundedSemaphore(workers + queue)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a parse thread; :class:`Overloaded` when every slot is taken."""
        if not self._slots.acquire(blocking=False):
            raise Overloaded(f"the server is parsing {self.workers + self.queue} request bodies already; retry shortly")
        try:
            future = self._executor.submit(fn, *args)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        return await asyncio.wrap_future(future)

    def shutdown(self) -> None:
        """Drop the queued parses; the pool stays usable (a new executor starts its threads on demand)."""
        old, self._executor = self._executor, ThreadPoolExecutor(self.workers, thread_name_prefix="scalerl-parse")
        old.shutdown(wait=False, cancel_futures=True)
