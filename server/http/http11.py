"""uvicorn's HTTP/1.1 protocol (h11) with a JSON 414 or 431 for a request line or headers over the limit, sent
with a lingering close so that the client reads it instead of a TCP reset (issue 40 item 8).

uvicorn answers a request head that h11 refuses with a plain-text 400 and closes the socket at once; a client still
sending its 180 KB URL or 1 MB of headers then gets a reset, not an answer. Here the answer says which limit was
met, the write side is shut down after it, and what the client still sends is read and dropped for up to
:data:`LINGER_SECONDS` (or :data:`LINGER_BYTES`) before the socket is closed. Heads under h11's limit but over the
service's own are refused by :class:`server.http.limits.HeadLimit` with the same answers.
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

#: The request line plus headers that h11 buffers while a head is incomplete (its default, 16 KiB).
MAX_HEAD_BYTES = 16 * 1024
LINGER_SECONDS = 2.0
LINGER_BYTES = 16 * 1024 * 1024

_REASONS = {400: "Bad Request", 414: "URI Too Long", 431: "Request Header Fields Too Large"}


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

    def data_received(self, data: bytes) -> None:
        if self._draining:
            self._drained += len(data)
            if self._drained > LINGER_BYTES:
                self.transport.close()
            return
        super().data_received(data)

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
