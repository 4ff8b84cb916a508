"""Waiting on the service from CI: calls retried through outages, and the poll for an experiment's verdict.

Invariants: a call that meets :class:`ServiceUnavailable` (no connection, a timeout, 429, 5xx) is retried with
the client's one back-off (:class:`scalerl.client.retry.Backoff` from 1 s: 1, 2, 4 … s, capped at ``max_backoff``;
a ``Retry-After`` is honoured up to that cap) and says so on every retry; after ``retry_for`` seconds without an
answer, or at the deadline, it raises :class:`Unreachable`. :class:`ApiError` (a 4xx) is never retried. Nothing
here exits: the command maps outcomes to exit codes (scalerl/cli/exit_codes.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from scalerl.client.api import ApiError, ServiceUnavailable
from scalerl.client.retry import Backoff

T = TypeVar("T")
Echo = Callable[[str], None]


class ScorecardSource(Protocol):
    def scorecard(self, experiment_id: int) -> dict[str, Any]: ...


class Unreachable(Exception):
    """The service did not answer within the retry window (or before the deadline)."""


def duration(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3725`` -> ``1h02m05s``."""
    s = max(0, round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m{s % 60:02d}s" if h else f"{m}m{s % 60:02d}s" if m else f"{s}s"


@dataclass
class Patient:
    """Calls that ride out an outage of up to ``retry_for`` seconds (see the module's invariants)."""

    retry_for: float
    echo: Echo
    max_backoff: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    _silent_since: float | None = field(default=None, init=False)
    _backoff: Backoff = field(init=False)

    def __post_init__(self) -> None:
        self._backoff = Backoff(cap=self.max_backoff, base=1.0)

    def call(self, request: Callable[[], T], deadline: float | None = None) -> T:
        """``request()``'s answer; retried while the service is unavailable; :class:`Unreachable` past the
        retry window or ``deadline`` (a ``clock()`` time)."""
        while True:
            try:
                answer = request()
            except ServiceUnavailable as exc:
                self._wait_after(exc, deadline)
                continue
            if self._silent_since is not None:
                self.echo(f"the service answers again (after {duration(self.clock() - self._silent_since)})")
            self._silent_since = None
            self._backoff.ok()
            return answer

    def _wait_after(self, exc: ServiceUnavailable, deadline: float | None) -> None:
        now = self.clock()
        if self._silent_since is None:
            self._silent_since = now
        wait = self._backoff.fail(now, exc.retry_after)
        silent = now - self._silent_since
        give_up = self._silent_since + self.retry_for
        if deadline is not None:
            give_up = min(give_up, deadline)
        if now >= give_up:
            raise Unreachable(f"{exc} (no answer for {duration(silent)})") from exc
        delay = min(wait, give_up - now)
        self.echo(
            f"service unavailable: {exc}; retry {self._backoff.failures} in {delay:.3g} s "
            f"(no answer for {duration(silent)}; giving up after {duration(self.retry_for)})"
        )
        self.sleep(delay)


@dataclass
class Progress:
    """Prints a verdict line when the verdict's state changes, and at least every ``heartbeat`` seconds."""

    echo: Echo
    heartbeat: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _started: float = field(default=0.0, init=False)
    _last: tuple[Any, ...] | None = field(default=None, init=False)
    _printed: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._started = self._printed = self.clock()

    def show(self, verdict: dict[str, Any]) -> None:
        now = self.clock()
        state = (verdict["decided"], verdict["finished"], verdict["best_run_id"], verdict["runner_up_id"])
        if state == self._last and now - self._printed < self.heartbeat:
            return
        self._last, self._printed = state, now
        what = "decided" if verdict["decided"] else "finished, not decided" if verdict["finished"] else "waiting"
        self.echo(f"[{duration(now - self._started)}] {what}: {verdict['reason']}")


def poll_verdict(
    patient: Patient, read: Callable[[], dict[str, Any]], deadline: float, poll: float, progress: Progress
) -> tuple[dict[str, Any], bool]:
    """Reads the verdict every ``poll`` seconds until it is decided or every run finished (returns it and
    ``False``), or until ``deadline`` (returns the last verdict and ``True``)."""
    while True:
        verdict = patient.call(read, deadline)
        progress.show(verdict)
        if verdict["decided"] or verdict["finished"]:
            return verdict, False
        left = deadline - patient.clock()
        if left <= 0:
            return verdict, True
        patient.sleep(min(poll, left))


def with_scorecard(patient: Patient, client: ScorecardSource, exp_id: int, verdict: dict[str, Any]) -> dict[str, Any]:
    """The verdict with the experiment's scorecard under ``scorecard`` (what the decisions did; ``None`` from a
    server that has none). Read once the wait ended; :class:`Unreachable` as any other call."""
    try:
        card: dict[str, Any] | None = patient.call(lambda: client.scorecard(exp_id))
    except ApiError:
        card = None
    return {**verdict, "scorecard": card}


def scorecard_line(verdict: dict[str, Any]) -> str | None:
    """The scorecard in one line once every run finished (``stops saved X of Y gpu_hours (Z%); decided at N% of
    the budget (run), unchanged since``); ``None`` before, or without one."""
    card = verdict.get("scorecard")
    summary = card.get("summary") if isinstance(card, dict) else None
    if not isinstance(summary, str) or not verdict.get("finished"):
        return None
    return f"scorecard: {summary}"
