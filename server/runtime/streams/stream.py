"""One open event stream: its own paged reads until it reaches its experiment's feed, then the feed's bytes.

Invariants: the stream sends every event after its cursor exactly once, in id order; it subscribes to the feed only
with a cursor at or past the feed's head (checked and subscribed with no await between); an inbox that overflowed
(a slow client) goes back to its own reads from the last event it sent; a closed inbox (revoked token) ends the
stream at its next wake; the token is looked up again at least every ``sse_poll_seconds``; an idle stream sends a
keep-alive comment every :data:`PING_SECONDS`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from server.runtime.streams.hub import StreamHub
from server.runtime.streams.inbox import Inbox
from server.runtime.streams.pages import PAGE, off_loop, read_page

PING = b": ping\n\n"
PING_SECONDS = 15.0


async def replay(hub: StreamHub, inbox: Inbox, experiment_id: int, cursor: int) -> AsyncIterator[bytes]:
    """The stored events after ``cursor``, a page per write, then the end (``follow=false``)."""
    while not inbox.closed:
        page = await off_loop(read_page, hub.engine, experiment_id, cursor)
        if len(page):
            cursor = page.last
            yield page.data
        if len(page) < PAGE:
            return


async def follow(hub: StreamHub, inbox: Inbox, experiment_id: int, cursor: int) -> AsyncIterator[bytes]:
    """The events after ``cursor``, then each new one as the experiment's feed reads it, until closed."""
    feed = hub.feed(experiment_id, inbox)
    poll = hub.settings.sse_poll_seconds
    sent = checked = time.monotonic()
    try:
        while True:
            # Catch up with the stream's own reads until the feed has read nothing this stream has not sent.
            while not (feed.ready and cursor >= feed.head):
                if inbox.closed:
                    return
                head = feed.head if feed.ready else None
                page = await feed.history.after(cursor)
                if len(page):
                    cursor = page.last
                    yield page.data
                    sent = time.monotonic()
                    if len(page) == PAGE or feed.ready:
                        continue
                elif head is not None:
                    cursor = max(cursor, head)  # nothing stored after the cursor: those events were deleted
                    continue
                await inbox.wait(poll)  # the feed's first read is under way; it signals its members when done
            feed.subscribe(inbox, cursor)
            while not inbox.overflowed:
                if inbox.closed:
                    return
                now = time.monotonic()
                if data := inbox.take():
                    cursor = inbox.floor
                    yield data
                    sent = time.monotonic()
                    continue
                if now - checked >= poll:
                    checked = now
                    if not await hub.still_valid(inbox):
                        return
                elif now - sent >= PING_SECONDS:
                    yield PING
                    sent = time.monotonic()
                else:
                    await inbox.wait(min(checked + poll, sent + PING_SECONDS) - now)
            feed.unsubscribe(inbox)  # a slow client: back to its own reads from the last event it sent
            inbox.rejoin(cursor)
    finally:
        hub.leave(feed, inbox)
