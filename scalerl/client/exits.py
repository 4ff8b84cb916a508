"""How a process that reports runs ends: SIGTERM/SIGHUP, an uncaught exception, or a plain exit without ``finish()``.

Invariants:
- Installed once per process, the first time a :class:`~scalerl.client.Reporter` starts in the main thread with
  ``handle_signals`` on. It never pre-empts the trainer's own SIGTERM/SIGHUP handler: one installed before it is
  called by its handler; one installed after it (replacing it, or calling it as "the previous handler") is wrapped
  again by :func:`keep_chained` (called by ``Reporter.start`` and ``Reporter.log`` in the main thread; well under a
  microsecond), so the signal is still seen before the trainer's handler
  runs. A handler set after the last ``log()`` and never calling the previous one is not seen.
- On a signal while the trainer has a Python handler, this module only records the signal (:func:`received`),
  wakes every reporter's sender to send what it buffered (without waiting for it) and calls the trainer's handler;
  no run is finished then: ``log()`` still records, and the trainer saves its checkpoint and ends as it decides.
- With no Python handler (``SIG_DFL``, or a handler not set from Python) the signal ends the process as before:
  every unfinished reporter flushes (at most ``FLUSH_SECONDS``) and reports ``failed`` with the signal's name, the
  default handler is restored and the signal raised again, so the status is the one a scheduler expects (``-15`` /
  143). With ``SIG_IGN`` the signal is recorded (:func:`ignored`) and nothing else happens.
- At interpreter exit a reporter that was not finished is finished: ``failed`` after an uncaught exception (the
  exception's text is the reason); else ``stopped`` after a handled signal ("the trainer ended after SIGTERM
  (preempted?)"; ``resume='allow'`` or ``scalerl resume`` continues the run); else its default (``succeeded``, or
  ``stopped`` when the service asked to stop), as W&B finishes a run at exit. Ctrl-C raises ``KeyboardInterrupt``,
  which counts as an uncaught exception unless the program catches it.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

try:  # the C function: signal.getsignal converts to an enum through a raised and caught exception for a Python
    # handler, 3.5 us a call against 0.013 us measured (keep_chained runs on every log())
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover - another interpreter
    _getsignal = signal.getsignal

if TYPE_CHECKING:
    from scalerl.client.reporter import Reporter

log = logging.getLogger("scalerl.client")

#: How long an ending process waits for each reporter's buffered points.
FLUSH_SECONDS = 10.0
_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)
_MAIN = threading.main_thread().ident


@dataclass(frozen=True)
class Received:
    """A signal this process received: its name (``"SIGTERM"``) and when (``time.time()``)."""

    name: str
    at: float


_live: weakref.WeakSet[Reporter] = weakref.WeakSet()
_lock = threading.Lock()
_installed = False  # atexit and the excepthook
_chaining = False  # our SIGTERM/SIGHUP handlers are installed (handle_signals, main thread)
_uncaught: BaseException | None = None
_received: Received | None = None
_ignored: Received | None = None
_running: list[_Chain] = []  # handlers of ours running now (the main thread's stack)
_previous_hook: Callable[[type[BaseException], BaseException, TracebackType | None], Any] | None = None


def track(reporter: Reporter, *, handle_signals: bool) -> None:
    """Finish ``reporter`` when the process ends (see the module docstring)."""
    global _installed
    with _lock:
        _live.add(reporter)
        first = not _installed
        _installed = True
    if first:
        atexit.register(_at_exit)
        _chain_excepthook()
    if handle_signals:
        _install()


def untrack(reporter: Reporter) -> None:
    with _lock:
        _live.discard(reporter)


def received() -> Received | None:
    """The last SIGTERM/SIGHUP this process received and did not ignore (None: none)."""
    return _received


def ignored() -> Received | None:
    """The last SIGTERM/SIGHUP received while its handler was ``SIG_IGN`` (None: none)."""
    return _ignored


def keep_chained() -> None:
    """Put our handler back in front of a SIGTERM/SIGHUP handler installed after ours (the trainer's), wrapping it:
    ours records the signal and calls it. Cheap (two C ``getsignal`` calls, well under a microsecond); does nothing
    outside the main thread, before a reporter installed ours, or when the handler now is ``SIG_DFL``/``SIG_IGN``
    (set on purpose)."""
    if not _chaining or threading.get_ident() != _MAIN:
        return
    for sig in _SIGNALS:
        current = _getsignal(sig)
        if type(current) is not _Chain and callable(current):
            try:
                signal.signal(sig, _Chain(current))
            except (ValueError, OSError):  # not allowed here: the trainer's handler still runs, unseen
                return


def _install() -> None:
    global _chaining
    if threading.get_ident() != _MAIN:
        return
    if _chaining:
        keep_chained()
        return
    for sig in _SIGNALS:
        try:
            signal.signal(sig, _Chain(signal.getsignal(sig)))
        except (ValueError, OSError):  # not allowed here (an embedded interpreter): exits still finish
            continue
        _chaining = True


class _Chain:
    """Our handler for one signal in front of ``previous``, the handler it replaced (see the module docstring)."""

    __slots__ = ("previous",)

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self in _running:  # the trainer's handler called ours back as its previous one
            return
        _running.append(self)
        try:
            self._handle(signum, frame)
        finally:
            _running.remove(self)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        global _received, _ignored
        name = signal.Signals(signum).name
        previous = self.previous
        # Not the process's handler now: called by a handler installed after ours, which decides the end.
        called_back = _getsignal(signum) is not self
        if callable(previous) or called_back:
            if len(_running) == 1:  # once per signal, however many of ours are in the chain
                _received = Received(name, time.time())
                log.warning(
                    "scalerl: %s received; the trainer's own handler decides how it ends (the runs of this process "
                    "are finished when it exits)",
                    name,
                )
                _send_soon()
            if callable(previous):
                previous(signum, frame)
            return
        if previous == signal.SIG_IGN:
            _ignored = Received(name, time.time())
            log.info("scalerl: %s received and ignored (SIG_IGN)", name)
            return
        log.warning("scalerl: %s received; reporting the runs of this process as failed", name)
        _finish_all("failed", f"the trainer was terminated by {name}")
        signal.signal(signum, signal.SIG_DFL)  # end as the signal says (exit status 128 + signum)
        os.kill(os.getpid(), signum)


def _send_soon() -> None:
    """Wake every reporter's sender without waiting: ``flush(0)`` only sets the flag and notifies (its lock is
    re-entrant, so a signal that lands inside ``log()`` does not deadlock)."""
    for reporter in list(_live):
        try:
            reporter.flush(0)
        except Exception as exc:  # a signal handler must not fail because of a reporter
            log.warning("scalerl: could not flush run %s: %r", reporter.name or reporter.run_id, exc)


def _finish_all(status: str | None, reason: str | None) -> None:
    for reporter in list(_live):
        try:
            reporter.finish(status, reason, timeout=FLUSH_SECONDS)  # type: ignore[arg-type]
        except Exception as exc:  # an ending process must not fail on the way out
            log.warning("scalerl: could not finish run %s: %r", reporter.name or reporter.run_id, exc)


def _chain_excepthook() -> None:
    global _previous_hook
    _previous_hook = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        global _uncaught
        _uncaught = exc
        assert _previous_hook is not None
        _previous_hook(kind, exc, tb)

    sys.excepthook = hook


def ended_by_signal_reason() -> str | None:
    """The reason a run ends with (``stopped``) when a handled signal came before the end; None: no signal."""
    sig = _received
    return None if sig is None else f"the trainer ended after {sig.name} (preempted?)"


def _at_exit() -> None:
    after_signal = ended_by_signal_reason()
    if _uncaught is not None:
        _finish_all("failed", f"the trainer raised {_uncaught!r}"[:2000])
    elif after_signal is not None:
        _finish_all("stopped", after_signal)
    else:
        _finish_all(None, None)
