"""Work off the request path: interval refits with recommendations, and the lease reaper.

The refitter coalesces: a run marked dirty many times is refitted once with its latest points, at most every
``min_seconds``. :meth:`IntervalRefitter.drain` waits until nothing is pending (tests, benchmarks, shutdown).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session, sessionmaker

from server.events import Notifier
from server.forecasting import store_fit
from server.models import Experiment, Run
from server.recommending import FitCache, recommend
from server.runs import reap_expired

log = logging.getLogger("scalerl.server")


def refit_with_intervals(
    sessions: sessionmaker[Session], cache: FitCache, run_id: int, factors: Sequence[float]
) -> None:
    """Full fit of one run (stored as a ``full`` snapshot), then the recommendations of its experiment."""
    with sessions.begin() as session:
        run = session.get(Run, run_id)
        if run is None:
            return
        experiment = session.get(Experiment, run.experiment_id)
        assert experiment is not None
        fit = cache.get(session, run, experiment)
        if fit.params is not None or fit.status != "insufficient_data":
            store_fit(session, run, fit, "full", factors, make_latest=False)
        recommend(session, experiment, cache)


class IntervalRefitter:
    """One daemon thread that refits dirty runs with intervals; ``submit`` never blocks the caller."""

    def __init__(
        self,
        work: Callable[[int], None],
        min_seconds: float,
        notify: Callable[[], None] | None = None,
    ) -> None:
        self._work = work
        self._min_seconds = min_seconds
        self._notify = notify
        self._cond = threading.Condition()
        self._due: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._busy = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="scalerl-refitter", daemon=True)
        self._thread.start()

    def submit(self, run_id: int) -> None:
        with self._cond:
            if run_id not in self._due:
                self._due[run_id] = max(time.monotonic(), self._last.get(run_id, 0.0) + self._min_seconds)
                self._cond.notify_all()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until no run is pending or being refitted; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            for run_id in self._due:
                self._due[run_id] = time.monotonic()
            self._cond.notify_all()
            while self._due or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _next(self) -> int | None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                ready = [r for r, t in self._due.items() if t <= now]
                if ready:
                    run_id = min(ready, key=self._due.__getitem__)
                    del self._due[run_id]
                    self._busy = True
                    return run_id
                wait = min(self._due.values()) - now if self._due else None
                self._cond.wait(wait)
            return None

    def _loop(self) -> None:
        while (run_id := self._next()) is not None:
            try:
                self._work(run_id)
            except Exception:  # a failed refit must not kill the thread; the next batch retries
                log.exception("interval refit of run %s failed", run_id)
            finally:
                with self._cond:
                    self._last[run_id] = time.monotonic()
                    self._busy = False
                    self._cond.notify_all()
            if self._notify is not None:
                self._notify()


def reap_once(sessions: sessionmaker[Session], notifier: Notifier) -> list[int]:
    with sessions.begin() as session:
        lost = reap_expired(session)
    if lost:
        notifier.notify()
    return lost
