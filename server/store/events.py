"""Experiment events (points, fits, recommendations, status changes): stored rows plus an in-process wake-up.

Invariant: an event is visible to SSE readers only once its transaction committed; its id orders it. Streams
wake on :meth:`Notifier.notify` (same process) and otherwise poll, so several server processes also work.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal

from sqlalchemy.orm import Session

from server.store.models import Event

EventType = Literal["points", "fit", "recommendations", "status", "run_created", "budget", "assessment", "policy"]


def emit(
    session: Session, experiment_id: int, type_: EventType, data: dict[str, Any], run_id: int | None = None
) -> None:
    """Add an event to the session's transaction."""
    session.add(Event(experiment_id=experiment_id, run_id=run_id, type=type_, data=data))


class Notifier:
    """Wakes waiting SSE streams of this process when new events were committed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def notify(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for loop, ev in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(ev.set)

    def subscribe(self) -> Wakeup:
        """A standing wake-up on the running loop, set by every later notify until closed: unlike :meth:`wait`,
        no notify between two waits is lost (one per event feed, not one per stream)."""
        wakeup = Wakeup(self)
        with self._lock:
            self._waiters.add(wakeup.item)
        return wakeup

    def _unsubscribe(self, item: tuple[asyncio.AbstractEventLoop, asyncio.Event]) -> None:
        with self._lock:
            self._waiters.discard(item)

    async def wait(self, timeout: float) -> None:
        """Return when notified or after ``timeout`` seconds."""
        item = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.add(item)
        try:
            await asyncio.wait_for(item[1].wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(item)


class Wakeup:
    """A :meth:`Notifier.subscribe` registration: :attr:`event` is set by every notify until :meth:`close`."""

    def __init__(self, notifier: Notifier) -> None:
        self.event = asyncio.Event()
        self.item = (asyncio.get_running_loop(), self.event)
        self._notifier = notifier

    async def wait(self, timeout: float) -> None:
        """Return at once when notified since the last :meth:`clear`, else at the next notify or after ``timeout``
        seconds (a timer, not a task per wait)."""
        if self.event.is_set():
            return
        handle = self.item[0].call_later(timeout, self.event.set)
        try:
            await self.event.wait()
        finally:
            handle.cancel()

    def clear(self) -> None:
        self.event.clear()

    def close(self) -> None:
        self._notifier._unsubscribe(self.item)
