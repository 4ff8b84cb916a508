"""A minimal loopback SMTP server for the email test: accepts one message at a time and keeps it."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def smtp_sink() -> Iterator[tuple[int, list[bytes]]]:
    messages: list[bytes] = []

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(b"220 sink ready\r\n")
            while line := self.rfile.readline():
                cmd = line.strip().upper()
                if cmd.startswith((b"EHLO", b"HELO")):
                    self.wfile.write(b"250 sink\r\n")
                elif cmd == b"DATA":
                    self.wfile.write(b"354 go ahead\r\n")
                    body = b""
                    while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                        body += chunk
                    messages.append(body)
                    self.wfile.write(b"250 queued\r\n")
                elif cmd == b"QUIT":
                    self.wfile.write(b"221 bye\r\n")
                    return
                else:
                    self.wfile.write(b"250 ok\r\n")

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], messages
    finally:
        server.shutdown()
        server.server_close()
