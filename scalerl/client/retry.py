"""The one retry policy of every caller of the REST API: the Reporter's thread, the worker's loops and the CLI's
waits (``scalerl wait``/``submit --wait``).

- What is retried: :class:`~scalerl.client.api.ServiceUnavailable` only (no connection, a timeout, a 429 or a
  5xx: :meth:`~scalerl.client.api.Client.request` decides which); an :class:`~scalerl.client.api.ApiError` (a 4xx)
  never is.
- How long to wait: :class:`Backoff`, i.e. ``rl_core.contracts.retry.backoff_delay``: ``base · 2^(failures-1)``
  seconds capped at ``cap``, lengthened by the service's ``Retry-After`` within the same cap; a success starts over.
- :func:`retrying`: call until the answer comes, or re-raise once the next try would be past a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from rl_core.contracts.retry import backoff_delay
from scalerl.client.api import ServiceUnavailable

T = TypeVar("T")


@dataclass
class Backoff:
    """Exponential back-off from ``base`` seconds (0.5, 1, 2, ...) capped at ``cap``; honours ``Retry-After``."""

    cap: float = 60.0
    base: float = 0.5
    failures: int = 0
    next_at: float = 0.0

    def fail(self, now: float, retry_after: float | None = None) -> float:
        """One more failure at ``now``: the seconds to wait (``next_at`` is when to try again); ``retry_after``
        (the service's ``Retry-After``) lengthens the wait, within ``cap``."""
        self.failures += 1
        delay = backoff_delay(self.failures, self.base, self.cap, retry_after)
        self.next_at = now + delay
        return delay

    def ok(self) -> None:
        """An answer came: the next failure waits ``base`` again."""
        self.failures, self.next_at = 0, 0.0


def retrying(
    call: Callable[[], T],
    backoff: Backoff,
    deadline: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``call()``'s answer, tried again after each :class:`ServiceUnavailable` as ``backoff`` says; the last
    :class:`ServiceUnavailable` is raised when the next try would come after ``deadline`` (a ``clock()`` time)."""
    while True:
        try:
            answer = call()
        except ServiceUnavailable as exc:
            now = clock()
            backoff.fail(now, exc.retry_after)
            if backoff.next_at > deadline:
                raise
            sleep(max(0.0, backoff.next_at - now))
            continue
        backoff.ok()
        return answer
