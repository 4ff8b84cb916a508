"""Every open event stream of a process: the cap per token, revocation, the periodic token check, the feeds.

Invariants: a token holds at most ``max_streams_per_token`` open streams at once (a stream holds its inbox from
before its response starts until it ends); a revocation closes every open stream of the token at once, whatever
event loop serves it; a token is looked up again at most once per ``sse_poll_seconds`` however many of its streams
are open (another process may have revoked it); one feed per (event loop, experiment) with at least one stream.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import Engine

from server.lifecycle.tokens import hash_token, implied_scopes, lookup_active
from server.runtime.streams.feed import Feed
from server.runtime.streams.inbox import Inbox
from server.runtime.streams.pages import off_loop
from server.store.events import Notifier
from server.store.settings import Settings

ANONYMOUS = ""
log = logging.getLogger("scalerl.server")


@dataclass
class _Holder:
    """One token's open streams and when it was last looked up."""

    inboxes: set[Inbox] = field(default_factory=set)
    checked: float = field(default_factory=time.monotonic)


class TooManyStreams(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this token already has {limit} event streams open on this server (max_streams_per_token); close one, "
            f"or raise the limit with SCALERL_MAX_STREAMS_PER_TOKEN"
        )


class StreamHub:
    """The open streams and feeds of one service context."""

    def __init__(self, engine: Engine, notifier: Notifier, settings: Settings) -> None:
        self.engine, self.notifier, self.settings = engine, notifier, settings
        self._lock = threading.Lock()  # revocations come from the worker threads of the DELETE
        self._holders: dict[str, _Holder] = {}
        self._feeds: dict[tuple[asyncio.AbstractEventLoop, int], Feed] = {}

    def open(self, secret: str | None) -> Inbox:
        """The inbox of a new stream for ``secret`` (None: anonymous reads); :class:`TooManyStreams` at the cap."""
        key = ANONYMOUS if secret is None else hash_token(secret)
        limit = self.settings.max_streams_per_token
        inbox = Inbox(key, secret)
        with self._lock:
            holder = self._holders.setdefault(key, _Holder())
            if len(holder.inboxes) >= limit:
                raise TooManyStreams(limit)
            holder.inboxes.add(inbox)
        return inbox

    def release(self, inbox: Inbox) -> None:
        """The stream ended (idempotent)."""
        with self._lock:
            holder = self._holders.get(inbox.key)
            if holder is not None:
                holder.inboxes.discard(inbox)
                if not holder.inboxes:
                    del self._holders[inbox.key]

    def revoke(self, token_hash: str) -> int:
        """Close every open stream of the token with this hash at once (from any thread); how many."""
        with self._lock:
            holder = self._holders.get(token_hash)
            inboxes = list(holder.inboxes) if holder is not None else []
        for inbox in inboxes:
            inbox.close_threadsafe()
        return len(inboxes)

    async def still_valid(self, inbox: Inbox) -> bool:
        """False once the stream's token was revoked or lost its read scope; looked up at most once per
        ``sse_poll_seconds`` per token (the stream that finds the check due does it for all)."""
        if inbox.closed:
            return False
        if inbox.secret is None:
            return True
        now = time.monotonic()
        with self._lock:
            holder = self._holders.get(inbox.key)
            if holder is None or now - holder.checked < self.settings.sse_poll_seconds:
                return not inbox.closed
            holder.checked = now  # claimed: the token's other streams skip this round
        try:
            valid = await off_loop(_reads, self.engine, inbox.secret)
        except Exception:  # the database restarting: streams stay open; the next round looks again
            log.warning("event streams: the token check failed; retrying", exc_info=True)
            return not inbox.closed
        if not valid:
            self.revoke(inbox.key)
        return valid and not inbox.closed

    def feed(self, experiment_id: int, inbox: Inbox) -> Feed:
        """The running loop's feed of ``experiment_id`` (started if none), with ``inbox`` a member."""
        slot = (asyncio.get_running_loop(), experiment_id)
        with self._lock:
            feed = self._feeds.get(slot)
            if feed is None:
                feed = self._feeds[slot] = Feed(
                    self.engine, self.notifier, experiment_id, self.settings.sse_poll_seconds
                )
        feed.join(inbox)
        return feed

    def leave(self, feed: Feed, inbox: Inbox) -> None:
        """``inbox``'s stream no longer uses ``feed``; the last one out stops it."""
        if feed.leave(inbox):
            with self._lock:
                slot = (feed.loop, feed.experiment_id)
                if self._feeds.get(slot) is feed:
                    del self._feeds[slot]


def _reads(engine: Engine, secret: str) -> bool:
    info = lookup_active(engine, secret)
    return info is not None and "read" in implied_scopes(info.scopes)
