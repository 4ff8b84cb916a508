"""Live experiment events over server-sent events, resumable with ``Last-Event-ID``.

The stream's work is in :mod:`server.runtime.streams`: one feed per experiment reads new events once and hands the
same bytes to every open stream. Here: the checks before a stream starts (token, experiment, the cap per token).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Query
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from server.base.types import MAX_ID
from server.lifecycle.experiments import get_experiment
from server.routes.deps import Credentials, Ctx, Reader
from server.routes.errors import doc, not_found
from server.routes.params import ExperimentId
from server.runtime.streams.hub import StreamHub, TooManyStreams
from server.runtime.streams.inbox import Inbox
from server.runtime.streams.stream import follow as follow_feed
from server.runtime.streams.stream import replay

router = APIRouter(prefix="/experiments", tags=["events"])


def _existing(experiment_id: ExperimentId, ctx: Ctx) -> int:
    """404 before the stream starts; the session is closed at once (a stream must not hold one)."""
    with ctx.sessions() as session:
        return get_experiment(session, experiment_id).id


class EventStream(StreamingResponse):
    """A ``text/event-stream`` answer whose stream's place under the cap is given back however it ends (even when
    the client left before the first byte)."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[bytes], hub: StreamHub, inbox: Inbox) -> None:
        super().__init__(content, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._hub, self._inbox = hub, inbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._hub.release(self._inbox)
            if isinstance(self.body_iterator, AsyncGenerator):
                await self.body_iterator.aclose()  # leaves its feed now (not when collected)


#: One message of the stream (OpenAPI 3.2's ``itemSchema`` for ``text/event-stream``).
SSE_MESSAGE = {
    "type": "object",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"}},
}


@router.get(
    "/{experiment_id}/events",
    response_class=EventStream,
    status_code=200,
    responses={
        200: {"content": {"text/event-stream": {"itemSchema": SSE_MESSAGE}}},
        **not_found("experiment"),
        **doc(429, "The token already holds max_streams_per_token open streams"),
    },
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
) -> EventStream:
    """Events of one experiment: ``points``, ``fit``, ``recommendations``, ``status``, ``run_created``, ``budget``.

    Each event's ``id`` is global and increasing; a client that reconnects with ``Last-Event-ID`` gets exactly
    the events it missed. ``data`` is JSON: ``{id, type, run_id, at, data}``.
    """
    cursor = last_event_id if last_event_id is not None else (after or 0)
    hub = ctx.streams
    try:
        inbox = hub.open(creds.credentials if creds is not None else None)
    except TooManyStreams as exc:
        raise HTTPException(429, str(exc)) from None
    body = (follow_feed if follow else replay)(hub, inbox, experiment_id, cursor)
    return EventStream(body, hub, inbox)
