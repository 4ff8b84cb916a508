"""What both compose harnesses (stack.py, two_hosts.py) need to report: timed stages in a log with its own prefix,
and a wait that retries a check through HTTP errors and the stack's own errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx


class StackError(AssertionError):
    pass


class Timeline:
    """A harness's log lines (``[prefix  seconds] message``) and its stages' timings, from its start."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.started = time.monotonic()
        self.timings: list[tuple[str, float, str]] = []

    def log(self, message: str) -> None:
        print(f"[{self.prefix} {time.monotonic() - self.started:7.1f}s] {message}", flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.log(f"=== {name}")
        t0 = time.monotonic()
        try:
            yield
        except BaseException:
            self.timings.append((name, time.monotonic() - t0, "FAILED"))
            raise
        self.timings.append((name, time.monotonic() - t0, "ok"))


class JsonApi:
    """The stack's REST API with a token: GETs answer JSON, an error answer raises :class:`StackError`."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params or None)
        if r.status_code >= 400:
            raise StackError(f"GET {path}: {r.status_code} {r.text[:300]}")
        return r.json()


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 1.0) -> Any:
    """``check()``'s first truthy value within ``timeout`` seconds; HTTP and stack errors count as not yet."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except (httpx.HTTPError, StackError) as exc:
            value, last = None, exc
        if value:
            return value
        time.sleep(interval)
    raise StackError(f"timed out after {timeout:g} s waiting for {what} (last error: {last})")
