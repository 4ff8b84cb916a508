"""How a process that reports runs ends: SIGTERM/SIGHUP, an uncaught exception, or a plain exit without ``finish()``.

Invariants:
- Installed once per process, the first time a :class:`~scalerl.client.Reporter` starts in the main thread with
  ``handle_signals`` on; never replaces a handler it did not chain: the previous SIGTERM/SIGHUP handler runs after
  the reporters finished, and a default handler is restored and the signal raised again, so the process ends with
  the status a scheduler expects (``-15`` / 143).
- On a signal every unfinished reporter flushes what it buffered (at most ``FLUSH_SECONDS``) and reports ``failed``
  with the signal's name (a preempted job's run can be continued with ``resume='allow'`` or ``scalerl retry``).
- At interpreter exit a reporter that was not finished is finished: ``failed`` after an uncaught exception (the
  exception's text is the reason), else its default (``succeeded``, or ``stopped`` when the service asked to stop),
  as W&B finishes a run at exit. Ctrl-C raises ``KeyboardInterrupt``, which counts as an uncaught exception unless
  the program catches it.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scalerl.client.reporter import Reporter

log = logging.getLogger("scalerl.client")

#: How long an ending process waits for each reporter's buffered points.
FLUSH_SECONDS = 10.0
_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)

_live: weakref.WeakSet[Reporter] = weakref.WeakSet()
_lock = threading.Lock()
_installed = False
_uncaught: BaseException | None = None
_previous: dict[int, Any] = {}
_previous_hook: Callable[[type[BaseException], BaseException, TracebackType | None], Any] | None = None


def track(reporter: Reporter, *, handle_signals: bool) -> None:
    """Finish ``reporter`` when the process ends (see the module docstring)."""
    global _installed
    with _lock:
        _live.add(reporter)
        if _installed:
            return
        _installed = True
    atexit.register(_at_exit)
    _chain_excepthook()
    if handle_signals and threading.current_thread() is threading.main_thread():
        for sig in _SIGNALS:
            try:
                _previous[sig] = signal.signal(sig, _on_signal)
            except (ValueError, OSError):  # not allowed here (an embedded interpreter): exits still finish
                continue


def untrack(reporter: Reporter) -> None:
    with _lock:
        _live.discard(reporter)


def _finish_all(status: str | None, reason: str | None) -> None:
    for reporter in list(_live):
        try:
            reporter.finish(status, reason, timeout=FLUSH_SECONDS)  # type: ignore[arg-type]
        except Exception as exc:  # an ending process must not fail on the way out
            log.warning("scalerl: could not finish run %s: %r", reporter.name or reporter.run_id, exc)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    log.warning("scalerl: %s received; reporting the runs of this process as failed", name)
    _finish_all("failed", f"the trainer was terminated by {name}")
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)  # end as the signal says (exit status 128 + signum)
    os.kill(os.getpid(), signum)


def _chain_excepthook() -> None:
    global _previous_hook
    _previous_hook = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        global _uncaught
        _uncaught = exc
        assert _previous_hook is not None
        _previous_hook(kind, exc, tb)

    sys.excepthook = hook


def _at_exit() -> None:
    if _uncaught is not None:
        _finish_all("failed", f"the trainer raised {_uncaught!r}"[:2000])
    else:
        _finish_all(None, None)
