"""Write slots: at most ``limit`` writes run at once, the rest wait in order, shared fairly between keys.

Invariants: a slot is granted in arrival order to the first waiter whose key holds fewer than ``per_key`` slots, so
one run (or one token) cannot take every slot while others wait; a waiter gives up after ``wait`` seconds (what a
write may cost in queueing, whatever the number ahead); at most ``max_waiting`` wait (their bodies are held in
memory), one more is turned away at once. Turning writes away early by the measured pace was tried and dropped:
clients that send their next batch only after an answer (every reporter) never grow the queue past their number,
and a pace inflated by one slow second shed 45-100 batches per 20 s at 100 clients, 5 % of the points/s
(docs/benchmarks.md). :meth:`Slots.retry_after` still uses the pace.
Everything runs on the event loop (no lock: nothing is awaited between a check and its update).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass, field

#: Weight of the newest service time in the running mean (a pace that follows load within ~10 writes).
PACE_WEIGHT = 0.1


@dataclass
class _Waiter:
    key: str
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Slots:
    def __init__(
        self,
        limit: int,
        per_key: int | None = None,
        wait: float | None = 1.0,
        name: str = "write",
        max_waiting: int = 1024,
    ) -> None:
        """``wait`` None: waiters wait for as long as it takes; ``max_waiting``: more are turned away at once."""
        self.limit = limit
        self.max_waiting = max_waiting
        self.per_key = per_key or limit
        self.wait = wait
        self.name = name
        self.busy = 0
        self.held: dict[str, int] = {}
        self.waiting: deque[_Waiter] = deque()
        self.pace = 0.05  # seconds a write holds its slot, a running mean (starts at a typical batch's time)
        self.shed = 0

    def expected_wait(self) -> float:
        """Seconds a write arriving now would wait for a slot, at the measured pace."""
        ahead = len(self.waiting) + self.busy - self.limit + 1
        return max(0.0, ahead * self.pace / self.limit)

    def retry_after(self) -> int:
        """Whole seconds (at least 1) after which the writes ahead of a refused one should have drained."""
        return max(1, math.ceil(self.expected_wait()))

    async def acquire(self, key: str) -> bool:
        """Take a slot for ``key``; False when none came within the slots' ``wait`` seconds, or at once when
        ``max_waiting`` writes wait already."""
        limit = self.wait
        if self._free_for(key) and not self.waiting:
            self._take(key)
            return True
        if len(self.waiting) >= self.max_waiting:
            self.shed += 1
            return False
        waiter = _Waiter(key)
        self.waiting.append(waiter)
        self._grant()  # a free slot that the waiters ahead cannot take (their key is at its share) is this one's
        try:
            await asyncio.wait_for(asyncio.shield(waiter.granted), timeout=limit)
            return True
        except TimeoutError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                return True  # granted just as the wait ran out: the slot is ours
            self.shed += 1
            return False
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.release(key, 0.0)  # granted, but the request is gone: hand the slot on
            raise
        finally:
            if not waiter.granted.done():
                waiter.granted.cancel()
            if waiter in self.waiting:
                self.waiting.remove(waiter)

    def release(self, key: str, held_for: float) -> None:
        """Give ``key``'s slot back (``held_for``: seconds it was held, which updates the pace) and grant the next."""
        self.busy -= 1
        left = self.held.get(key, 0) - 1
        if left > 0:
            self.held[key] = left
        else:
            self.held.pop(key, None)
        if held_for > 0:
            self.pace += PACE_WEIGHT * (held_for - self.pace)
        self._grant()

    def _free_for(self, key: str) -> bool:
        return self.busy < self.limit and self.held.get(key, 0) < self.per_key

    def _take(self, key: str) -> None:
        self.busy += 1
        self.held[key] = self.held.get(key, 0) + 1

    def _grant(self) -> None:
        for waiter in list(self.waiting):
            if self.busy >= self.limit:
                return
            if waiter.granted.done() or not self._free_for(waiter.key):
                continue
            self._take(waiter.key)
            self.waiting.remove(waiter)
            waiter.granted.set_result(None)


class Held:
    """One granted slot and its clock: :meth:`release` gives it back with the time it was held."""

    def __init__(self, slots: Slots, key: str) -> None:
        self.slots, self.key = slots, key
        self.since = time.perf_counter()

    def release(self) -> None:
        self.slots.release(self.key, time.perf_counter() - self.since)
