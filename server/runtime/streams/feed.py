"""One change feed per experiment with open streams (per event loop): one read per wake, fanned out to them all.

Invariants: the feed's :attr:`Feed.head` is the last event id it read (known once :attr:`Feed.ready`); every event
after it that commits is read once by the feed and pushed, as the same bytes, to every subscribed inbox; a stream
subscribes only with a cursor at or past the head (it catches up with its own reads before), so it gets each event
exactly once; reads are coalesced to at most one every :data:`INTERVAL` seconds however many commits woke the feed;
a push never waits (an inbox that overflows is dropped from the feed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Engine

from server.runtime.streams.history import History
from server.runtime.streams.inbox import Inbox
from server.runtime.streams.pages import PAGE, Page, last_event_id, off_loop, read_page
from server.store.events import Notifier

T = TypeVar("T")
log = logging.getLogger("scalerl.server")

#: Seconds between two reads of one feed. A read costs the same for 1 or 500 new events, and each read is one
#: write per open stream: with 200 streams and one client ingesting without pause, see bench/stall.py --cases sse.
INTERVAL = 0.25


class Feed:
    """The reader of one experiment's new events and the inboxes it pushes them to."""

    def __init__(self, engine: Engine, notifier: Notifier, experiment_id: int, poll_seconds: float) -> None:
        self.engine, self.notifier, self.poll_seconds = engine, notifier, poll_seconds
        self.experiment_id = experiment_id
        self.loop = asyncio.get_running_loop()
        self.head = 0
        self.ready = False
        self.members: set[Inbox] = set()  # streams using this feed: catching up or subscribed
        self.history = History(engine, experiment_id)  # the catch-up reads of its members, shared
        self._subscribed: set[Inbox] = set()
        self._task: asyncio.Task[None] | None = None

    def join(self, inbox: Inbox) -> None:
        self.members.add(inbox)
        if self._task is None:
            self._task = self.loop.create_task(self._run(), name=f"event feed {self.experiment_id}")

    def leave(self, inbox: Inbox) -> bool:
        """Forget ``inbox``; True when no stream uses the feed any more (its reader is stopped)."""
        self.members.discard(inbox)
        self._subscribed.discard(inbox)
        if self.members:
            return False
        if self._task is not None:
            self._task.cancel()
            self._task = None
        return True

    def subscribe(self, inbox: Inbox, cursor: int) -> None:
        """Push the events after ``cursor`` (at or past :attr:`head`) to ``inbox`` from now on."""
        assert self.ready and cursor >= self.head, (cursor, self.head)
        inbox.rejoin(cursor)
        self._subscribed.add(inbox)

    def unsubscribe(self, inbox: Inbox) -> None:
        self._subscribed.discard(inbox)

    async def _run(self) -> None:
        wakeup = self.notifier.subscribe()
        try:
            self.head = await self._retrying(last_event_id, self.engine, self.experiment_id)
            self.ready = True
            for inbox in self.members:
                inbox.signal.set()
            last_read = 0.0
            while True:
                await wakeup.wait(self.poll_seconds)  # a commit here, or another process's after the poll
                await asyncio.sleep(max(0.0, last_read + INTERVAL - time.monotonic()))
                wakeup.clear()  # commits from here on wake the next round; this read sees those before it
                last_read = time.monotonic()
                page = await self._read()
                while len(page) == PAGE:  # a burst larger than one page: read on at once
                    page = await self._read()
        finally:
            wakeup.close()

    async def _read(self) -> Page:
        page = await self._retrying(read_page, self.engine, self.experiment_id, self.head)
        if len(page):
            self.head = page.last
            self._push(page)
        return page

    def _push(self, page: Page) -> None:
        dropped = [inbox for inbox in self._subscribed if not inbox.push(page)]
        self._subscribed.difference_update(dropped)

    async def _retrying(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` off the loop, again every poll interval while it fails (the database restarting)."""
        while True:
            try:
                return await off_loop(fn, *args)
            except Exception:
                log.exception("event feed of experiment %d: read failed; retrying", self.experiment_id)
                await asyncio.sleep(self.poll_seconds)
