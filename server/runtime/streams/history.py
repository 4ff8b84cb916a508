"""Catch-up pages shared by the streams of one experiment: streams that are behind read the same pages.

Invariants: streams asking for the page after the same event id at once share one read (single flight); a full
page (:data:`~server.runtime.streams.pages.PAGE` events) is kept, since no event can join it later, so streams that
open one after another (200 dashboards opened from the start) read the history once, not once each; a short page
(the tail) is never kept; kept pages are bounded by their bytes, the oldest used dropped first.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from sqlalchemy import Engine

from server.runtime.streams.pages import PAGE, Page, off_loop, read_page

#: Bytes of full pages kept per experiment with open streams.
KEPT_BYTES = 16 * 1024 * 1024


class History:
    """The shared catch-up reads of one experiment's streams."""

    def __init__(self, engine: Engine, experiment_id: int, kept_bytes: int = KEPT_BYTES) -> None:
        self.engine, self.experiment_id, self.kept_bytes = engine, experiment_id, kept_bytes
        self._kept: OrderedDict[int, Page] = OrderedDict()
        self._size = 0
        self._flights: dict[int, asyncio.Future[Page]] = {}

    async def after(self, cursor: int) -> Page:
        """The page of events after ``cursor``."""
        page = self._kept.get(cursor)
        if page is not None:
            self._kept.move_to_end(cursor)
            return page
        flight = self._flights.get(cursor)
        if flight is None:
            flight = asyncio.ensure_future(off_loop(read_page, self.engine, self.experiment_id, cursor))
            self._flights[cursor] = flight
            flight.add_done_callback(lambda done: self._landed(cursor, done))
        return await asyncio.shield(flight)

    def _landed(self, cursor: int, flight: asyncio.Future[Page]) -> None:
        self._flights.pop(cursor, None)
        if flight.cancelled() or flight.exception() is not None:
            return
        page = flight.result()
        if len(page) < PAGE:
            return
        self._kept[cursor] = page
        self._size += len(page.data)
        while self._size > self.kept_bytes and self._kept:
            _, old = self._kept.popitem(last=False)
            self._size -= len(old.data)
