"""Pages of an experiment's events, read with one autocommit query and encoded once to server-sent-event bytes.

Invariants: a page holds events in increasing id order; its bytes are exactly what a stream sends (``event:``,
``data:`` JSON ``{id, type, run_id, at, data}``, ``id:``), so a page read once is sent as is to every stream;
every read runs in the streams' own executor, never in the worker-thread pool that ingestion shares.
"""

from __future__ import annotations

import asyncio
import json
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any, TypeVar, cast

from sqlalchemy import Engine, Table, func, select

from server.assess.advice import finished_runs, for_unfinished
from server.lifecycle.runs import as_utc
from server.store.models import Event

T = TypeVar("T")

#: Events per read: a stream far behind catches up in pages of this many.
PAGE = 500
RECOMMENDATIONS = "recommendations"

#: Two threads: every feed's read and every catch-up page; one feed read serves all of its streams.
_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="scalerl-sse")


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in the streams' executor."""
    return await asyncio.get_running_loop().run_in_executor(_executor, fn, *args)


class Page:
    """Events ``ids`` and their encoded ``parts`` (one SSE message each), in id order."""

    def __init__(self, ids: list[int], parts: list[bytes]) -> None:
        self.ids = ids
        self.parts = parts

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def last(self) -> int:
        return self.ids[-1]

    @cached_property
    def data(self) -> bytes:
        """Every message of the page, joined once (shared by every stream that is sent the whole page)."""
        return b"".join(self.parts)

    def after(self, cursor: int) -> bytes:
        """The messages of events after ``cursor``."""
        if not self.ids or cursor < self.ids[0]:
            return self.data
        return b"".join(self.parts[bisect_right(self.ids, cursor) :])


def encode(row: dict[str, Any]) -> bytes:
    """One event as an SSE message (the same bytes as FastAPI's ``ServerSentEvent`` with ``raw_data``)."""
    data = json.dumps(row, separators=(",", ":"))
    return f"event: {row['type']}\ndata: {data}\nid: {row['id']}\n\n".encode()


def read_page(engine: Engine, experiment_id: int, after: int, limit: int = PAGE) -> Page:
    """The next events after ``after``: one autocommit read (no transaction, no lock, even on SQLite).

    A ``recommendations`` event carries advice only for the runs that have not finished since (as the REST
    recommendations do)."""
    t = cast(Table, Event.__table__)
    stmt = select(t).where(t.c.experiment_id == experiment_id, t.c.id > after).order_by(t.c.id).limit(limit)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        rows = conn.execute(stmt).all()
        finished = finished_runs(conn, experiment_id) if any(e.type == RECOMMENDATIONS for e in rows) else set()
    return Page(
        [e.id for e in rows],
        [
            encode(
                {
                    "id": e.id,
                    "type": e.type,
                    "run_id": e.run_id,
                    "at": as_utc(e.created_at).isoformat(),
                    "data": _still_applies(e.type, e.data, finished),
                }
            )
            for e in rows
        ],
    )


def last_event_id(engine: Engine, experiment_id: int) -> int:
    """The experiment's newest event id (0: none yet)."""
    t = cast(Table, Event.__table__)
    stmt = select(func.max(t.c.id)).where(t.c.experiment_id == experiment_id)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        return int(conn.execute(stmt).scalar() or 0)


def _still_applies(kind: str, data: Any, finished: set[int]) -> Any:
    if kind != RECOMMENDATIONS or not isinstance(data, dict) or not isinstance(data.get("recommendations"), list):
        return data
    return {**data, "recommendations": for_unfinished(data["recommendations"], finished)}
