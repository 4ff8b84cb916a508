"""A free TCP port for a rendezvous (process groups, stores) that this process is about to host."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on ``host`` now (another process may still take it before it is bound)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
