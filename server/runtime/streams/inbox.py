"""One open stream's side of the feed: the bytes the feed handed it and not yet sent, bounded.

Invariants: every state change (bytes pushed, overflow, close, the feed becoming ready) sets :attr:`Inbox.signal`,
so a stream waits on one event only; bytes are pushed in id order and never twice (events at or below
:attr:`Inbox.floor` are cut out); past :attr:`Inbox.limit` pending bytes the inbox drops them all and reports
overflow (the feed stops pushing to it; its stream catches up with its own reads), so a slow client never holds up
the feed or the other streams. A revoked inbox is closed from any thread through its own loop.
"""

from __future__ import annotations

import asyncio

from server.runtime.streams.pages import Page

#: Pending bytes a stream may hold (a client that reads slower than the feed writes): past this it drops to its own
#: catch-up reads. The bytes of a page are shared by every stream that is sent the whole page.
LIMIT = 512 * 1024


class Inbox:
    """Pending SSE bytes of one open stream, filled by its experiment's feed and drained by the stream."""

    def __init__(self, key: str, secret: str | None, limit: int = LIMIT) -> None:
        self.key = key  # the token's hash ("" for anonymous reads): what a revocation names
        self.secret = secret  # what the periodic check looks up (None: anonymous)
        self.loop = asyncio.get_running_loop()
        self.signal = asyncio.Event()
        self.limit = limit
        self.floor = 0  # the last event id pushed or already sent by the stream itself
        self.overflowed = False
        self.closed = False
        self._chunks: list[bytes] = []
        self._size = 0

    def push(self, page: Page) -> bool:
        """Queue the events of ``page`` after :attr:`floor`; False when that overflowed the limit (all dropped)."""
        if not len(page) or page.last <= self.floor:
            return True
        data = page.after(self.floor)
        if self._size + len(data) > self.limit:
            self._chunks.clear()
            self._size = 0
            self.overflowed = True
            self.signal.set()
            return False
        self._chunks.append(data)
        self._size += len(data)
        self.floor = page.last
        self.signal.set()
        return True

    def take(self) -> bytes:
        """Every pending byte at once (one write per wake, however many events), up to event :attr:`floor`."""
        chunks, self._chunks, self._size = self._chunks, [], 0
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def rejoin(self, cursor: int) -> None:
        """Start over after ``cursor`` (the last event the stream sent), with nothing pending."""
        self._chunks, self._size = [], 0
        self.floor = cursor
        self.overflowed = False

    def close(self) -> None:
        """End the stream at its next wake (revoked token)."""
        self.closed = True
        self.signal.set()

    def close_threadsafe(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.close)

    async def wait(self, timeout: float) -> None:
        """Until the next state change or ``timeout`` seconds (a timer, not a task per wait)."""
        if not self.signal.is_set():
            handle = self.loop.call_later(timeout, self.signal.set)
            try:
                await self.signal.wait()
            finally:
                handle.cancel()
        self.signal.clear()
