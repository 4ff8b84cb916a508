"""uvicorn's HTTP/1.1 protocol (h11) with a JSON 414 or 431 for a request line or headers over the limit, sent
with a lingering close so that the client reads it instead of a TCP reset, and a deadline for every request head.

A connection that opens and sends nothing, or starts a head and never finishes it, is answered 408 and closed
after ``head_timeout`` seconds (uvicorn times out only idle keep-alive connections between requests); such a socket
never reaches the application, so it holds nothing but its file descriptor meanwhile.

uvicorn answers a request head that h11 refuses with a plain-text 400 and closes the socket at once; a client still
sending its 180 KB URL or 1 MB of headers then gets a reset, not an answer. Here the answer says which limit was
met, the write side is shut down after it, and what the client still sends is read and dropped for up to
:data:`LINGER_SECONDS` (or :data:`LINGER_BYTES`) before the socket is closed. Heads under h11's limit but over the
service's own are refused by :class:`server.http.limits.HeadLimit` with the same answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: The request line plus headers that h11 buffers while a head is incomplete (its default, 16 KiB).
MAX_HEAD_BYTES = 16 * 1024
LINGER_SECONDS = 2.0
LINGER_BYTES = 16 * 1024 * 1024

#: Seconds a request head may take to arrive, unless :func:`limited_h11` says otherwise.
HEAD_TIMEOUT = 10.0

_REASONS = {400: "Bad Request", 408: "Request Timeout", 414: "URI Too Long", 431: "Request Header Fields Too Large"}


def refusal(status: int, detail: str) -> bytes:
    """A complete HTTP/1.1 response: JSON ``{"detail": ...}`` and ``Connection: close``."""
    body = json.dumps({"detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class LimitedH11Protocol(H11Protocol):
    """Pass it to uvicorn as ``http=LimitedH11Protocol``."""

    _draining = False
    _drained = 0
    _head_timer: asyncio.TimerHandle | None = None
    head_timeout = HEAD_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._draining:
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self.transport.close()
            return
        super().data_received(data)
        self._watch_head()

    def _watch_head(self) -> None:
        """Arm the head's deadline while a head is due and incomplete (bytes of it arrived, or the connection is
        new); disarm it once the head is in. Between requests uvicorn's keep-alive timeout applies instead."""
        waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        started = bool(getattr(self.conn, "_receive_buffer", b"")) or self.cycle is None
        if waiting and started and self.timeout_keep_alive_task is None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.head_timeout, self._head_expired)
        else:
            self._stop_head_timer()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._linger(refusal(408, f"the request head did not arrive within {self.head_timeout:g} s"))

    def send_400_response(self, msg: str) -> None:
        buffered = getattr(self.conn, "_receive_buffer", None)  # what h11 held when it gave up (private, optional)
        head = bytes(buffered)[: MAX_HEAD_BYTES + 1] if buffered is not None else b""
        if len(head) > MAX_HEAD_BYTES and b"\n" not in head:
            answer = refusal(414, f"the request line is longer than {MAX_HEAD_BYTES} bytes")
        elif len(head) > MAX_HEAD_BYTES:
            answer = refusal(431, f"the request line and headers are longer than {MAX_HEAD_BYTES} bytes")
        else:
            answer = refusal(400, "invalid HTTP request")
        self._linger(answer)

    def _linger(self, answer: bytes) -> None:
        self._draining = True
        transport: Any = self.transport
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, transport.close)


def limited_h11(head_timeout: float = HEAD_TIMEOUT) -> type[LimitedH11Protocol]:
    """:class:`LimitedH11Protocol` with its own head deadline (uvicorn builds one protocol object per connection)."""
    return type("LimitedH11Protocol", (LimitedH11Protocol,), {"head_timeout": head_timeout})
