"""Tokens as the request path sees them: looked up off the event loop, in threads of their own, and remembered
briefly.

Invariants: at most :data:`LOOKUP_THREADS` lookups (so database connections) run at once, whatever the number of
sockets presenting tokens, so a crowd of garbage tokens cannot take the connections that writes need; an answer
(active or not) is reused for ``ttl`` seconds, so a client's token costs one query per ``ttl``; a revocation
through this process (:meth:`TokenCache.forget`) takes effect at once, one through another process within ``ttl``.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine

from server.base.lru import Bounded
from server.lifecycle.tokens import TokenInfo, hash_token, lookup_active

LOOKUP_THREADS = 2
#: Distinct secrets remembered (active and unknown ones alike).
ENTRIES = 10_000


class TokenCache:
    def __init__(self, engine: Engine, ttl: float = 2.0) -> None:
        self.engine = engine
        self.ttl = ttl
        self._answers: Bounded[str, tuple[float, TokenInfo | None]] = Bounded(ENTRIES)
        self._executor = ThreadPoolExecutor(max_workers=LOOKUP_THREADS, thread_name_prefix="scalerl-tokens")

    async def lookup(self, secret: str) -> TokenInfo | None:
        """The active token with this secret, or None (unknown or revoked)."""
        key = hash_token(secret)
        cached = self._answers.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.ttl:
            return cached[1]
        loop = asyncio.get_running_loop()
        info = await loop.run_in_executor(self._executor, lookup_active, self.engine, secret)
        self._answers.put(key, (time.monotonic(), info))
        return info

    def forget(self) -> None:
        """Drop every remembered answer (a token was revoked or created here)."""
        self._answers.clear()

    def shutdown(self) -> None:
        """Drop queued lookups; the cache stays usable (a new executor starts its threads on demand)."""
        old = self._executor
        self._executor = ThreadPoolExecutor(max_workers=LOOKUP_THREADS, thread_name_prefix="scalerl-tokens")
        old.shutdown(wait=False, cancel_futures=True)
