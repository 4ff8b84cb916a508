"""The run status machine: which transitions are allowed, and what a trainer should do in each status.

``queued`` → ``running`` (claimed or first metrics) → ``succeeded``/``failed``; ``stopping`` is a request the
trainer acknowledges with ``stopped``; ``lost`` is a lease that expired, or a trainer of its own that went silent
past its promised heartbeat, queued (registered, never reported) or running (it is ``running`` again when it
reports). ``stopped``/``succeeded`` can be resumed and ``failed``/``lost`` retried, both back to ``queued``. A
queued run can be ended by hand as ``stopped`` or ``failed``, a lost one with any final status (``scalerl finish
--status``; its trainer's own late report too): no run is ever stuck. Every transition is recorded with its reason.
"""

from __future__ import annotations

from typing import Literal

RunStatus = Literal["queued", "running", "stopping", "stopped", "succeeded", "failed", "lost"]
STATUSES: tuple[RunStatus, ...] = ("queued", "running", "stopping", "stopped", "succeeded", "failed", "lost")
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
LEASED: frozenset[str] = frozenset({"running", "stopping"})
TERMINAL: frozenset[str] = frozenset({"stopped", "succeeded", "failed", "lost"})
#: Ended and not coming back on its own (a ``lost`` run is retried automatically): it gets no stop/continue advice.
FINISHED: frozenset[str] = frozenset({"stopped", "succeeded", "failed"})
#: What ``POST /runs/{id}/resume`` accepts: ended by choice or done (e.g. queued again after a budget extension).
RESUMABLE: tuple[str, ...] = ("stopped", "succeeded")
#: What ``POST /runs/{id}/retry`` accepts: ended by a fault; the next start counts as a new attempt.
RETRYABLE: tuple[str, ...] = ("failed", "lost")

TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "stopped", "failed", "lost"}),
    "running": frozenset({"stopping", "stopped", "succeeded", "failed", "lost"}),
    "stopping": frozenset({"stopped", "succeeded", "failed", "lost"}),
    "stopped": frozenset({"queued"}),
    "succeeded": frozenset({"queued"}),
    "failed": frozenset({"queued"}),
    "lost": frozenset({"queued", "running", "stopped", "succeeded", "failed"}),
}

Action = Literal["continue", "stop"]
#: What registering a run under a name that exists does (``RunCreate.resume``).
ResumePolicy = Literal["never", "auto", "allow", "must"]
#: Statuses a run of that name is attached to under ``resume="auto"`` (it has not ended).
LIVE: frozenset[str] = frozenset({"queued", "running", "stopping", "lost"})


class TransitionError(ValueError):
    """A status change the machine does not allow."""


def check_transition(current: str, target: str) -> None:
    if target not in TRANSITIONS.get(current, frozenset()):
        allowed = sorted(TRANSITIONS.get(current, frozenset()))
        raise TransitionError(f"cannot go from {current!r} to {target!r}; allowed from {current!r}: {allowed}")


def action_for(status: str) -> Action:
    """What a trainer reporting for a run in ``status`` must do."""
    return "continue" if status in ACTIVE else "stop"
