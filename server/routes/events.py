"""Live experiment events over server-sent events, resumable with ``Last-Event-ID``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Header, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent
from sqlalchemy import Table, select

from server.assess.advice import finished_runs, for_unfinished
from server.base.types import MAX_ID
from server.lifecycle.experiments import get_experiment
from server.lifecycle.runs import as_utc
from server.lifecycle.tokens import implied_scopes, lookup_active
from server.routes.deps import Credentials, Ctx, Reader
from server.routes.errors import not_found
from server.routes.params import ExperimentId
from server.runtime.context import ServiceContext
from server.store.models import Event
from server.store.streamreads import shared, token_still_valid

PAGE = 500
RECOMMENDATIONS = "recommendations"
router = APIRouter(prefix="/experiments", tags=["events"])


def _existing(experiment_id: ExperimentId, ctx: Ctx) -> int:
    """404 before the stream starts; the session is closed at once (a stream must not hold one)."""
    with ctx.sessions() as session:
        return get_experiment(session, experiment_id).id


def _still_valid(ctx: ServiceContext, secret: str) -> bool:
    info = lookup_active(ctx.engine, secret)
    return info is not None and "read" in implied_scopes(info.scopes)


def _page(ctx: ServiceContext, experiment_id: int, after: int) -> list[dict[str, Any]]:
    """The next events after ``after``: one autocommit read (no transaction, no lock, even on SQLite)."""
    t = cast(Table, Event.__table__)
    stmt = select(t).where(t.c.experiment_id == experiment_id, t.c.id > after).order_by(t.c.id).limit(PAGE)
    with ctx.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        rows = conn.execute(stmt).all()
        finished = finished_runs(conn, experiment_id) if any(e.type == RECOMMENDATIONS for e in rows) else set()
    return [
        {
            "id": e.id,
            "type": e.type,
            "run_id": e.run_id,
            "at": as_utc(e.created_at).isoformat(),
            "data": _still_applies(e.type, e.data, finished),
        }
        for e in rows
    ]


def _events(ctx: ServiceContext, experiment_id: int, after: int) -> list[tuple[int, ServerSentEvent]]:
    """The next page as ready-to-send events: encoded once, then yielded to every stream that shares the read."""
    return [
        (
            row["id"],
            ServerSentEvent(raw_data=json.dumps(row, separators=(",", ":")), event=row["type"], id=str(row["id"])),
        )
        for row in _page(ctx, experiment_id, after)
    ]


def _still_applies(kind: str, data: Any, finished: set[int]) -> Any:
    """A ``recommendations`` event carries advice only for the runs that have not finished since (as the REST
    recommendations do)."""
    if kind != RECOMMENDATIONS or not isinstance(data, dict) or not isinstance(data.get("recommendations"), list):
        return data
    return {**data, "recommendations": for_unfinished(data["recommendations"], finished)}


@router.get(
    "/{experiment_id}/events",
    response_class=EventSourceResponse,
    responses=not_found("experiment"),
)
async def stream_events(
    _: Reader,  # first: the token is checked before the experiment id (ids cannot be probed)
    experiment_id: Annotated[int, Depends(_existing)],
    ctx: Ctx,
    creds: Credentials,
    last_event_id: Annotated[
        int | None, Header(alias="Last-Event-ID", ge=0, le=MAX_ID, description="Resume after this event id.")
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_ID, description="Resume after this event id (if no Last-Event-ID).")
    ] = None,
    follow: Annotated[bool, Query(description="Keep the stream open for new events (false: replay and close).")] = True,
) -> AsyncIterator[ServerSentEvent]:
    """Events of one experiment: ``points``, ``fit``, ``recommendations``, ``status``, ``run_created``, ``budget``.

    Each event's ``id`` is global and increasing; a client that reconnects with ``Last-Event-ID`` gets exactly
    the events it missed. ``data`` is JSON: ``{id, type, run_id, at, data}``.
    """
    cursor = last_event_id if last_event_id is not None else (after or 0)
    secret = creds.credentials if creds is not None else None
    while True:
        # Reads shared by every stream that asks the same at once, off the shared thread pool
        # (server.store.streamreads).
        if secret is not None and not await token_still_valid(secret, partial(_still_valid, ctx)):
            return  # the token was revoked (or lost its read scope) while the stream was open
        rows = await shared((id(ctx), experiment_id, cursor), _events, ctx, experiment_id, cursor)
        for event_id, event in rows:
            cursor = event_id
            yield event
        if len(rows) < PAGE:
            if not follow:
                return
            await ctx.notifier.wait(ctx.settings.sse_poll_seconds)
