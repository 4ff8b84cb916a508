"""A loopback HTTP receiver for webhook tests: records every POST; can answer 500 a few times first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.support.http import Reply, Request, local_service


@dataclass
class Receiver:
    url: str
    requests: list[Request] = field(default_factory=list)
    fail_first: int = 0


@contextmanager
def webhook_receiver(fail_first: int = 0) -> Iterator[Receiver]:
    """``url`` is the receiver's ``/hook``; every request lands in ``requests``, the first ``fail_first`` get a 500."""
    state = Receiver(url="", fail_first=fail_first)

    def receive(request: Request) -> Reply:
        state.requests.append(request)
        state.fail_first -= 1
        return Reply(500 if state.fail_first >= 0 else 200, b"ok")

    with local_service(receive) as base:
        state.url = f"{base}/hook"
        yield state
