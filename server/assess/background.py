"""Work off the request path: runs' point fits, assessments (interval refits, recommendations, the stored
assessment), and the lease reaper.

A refitter coalesces per key: a run (point fits) or an experiment (assessments) marked dirty many times is processed
once, with its latest stored points, at most every ``min_seconds``. :meth:`IntervalRefitter.drain` waits until
nothing is pending (tests, benchmarks, shutdown). The dirty mark of a point fit is durable without a column of its
own: a run whose stored evaluations are newer than its fit (:func:`server.assess.point_fit.point_fit_stale`) is
refitted at start (``server.app.refit_stale_runs``) and by its next POST.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from rl_core.scaling import CurveFit, Recommendation
from server.assess.assessing import build_assessment, current_state, store
from server.assess.fitcache import FitCache, fit_key, grid_fitted
from server.assess.fitpool import FitPool
from server.assess.point_fit import load_fit_curve, store_point_fit
from server.assess.schemas import AssessmentOut
from server.lifecycle.runs import reap_expired, reap_silent
from server.lifecycle.spec import ExperimentSpec, run_with_spec
from server.store.db import read_session, with_retries
from server.store.events import Notifier
from server.store.models import Experiment, Run, StoredAssessment

log = logging.getLogger("scalerl.server")


@dataclass
class PointRefit:
    """Refit a run's fast point fit from its stored points (at most :data:`server.assess.point_fit.MAX_POINT_FIT_POINTS`
    of them, thinned and read by rank, so its cost does not grow with the run) in the fit pool's point-fit process,
    and store it as the run's latest fit; then ``after`` is called with the run's experiment (its assessment reads the
    new points)."""

    engine: Engine
    sessions: sessionmaker[Session]
    pool: FitPool
    factors: Sequence[float]
    after: Callable[[int], None] | None = None

    def __call__(self, run_id: int) -> None:
        with read_session(self.engine) as reader:
            found = run_with_spec(reader, run_id)
            if found is None:
                return
            spec = found[1]
            curve = load_fit_curve(reader, run_id)
        fit = self.pool.point_fit(curve, spec.fit)  # no transaction (and no SQLite write lock) held

        def store() -> None:
            with self.sessions.begin() as session:
                store_point_fit(session, run_id, fit, self.factors)

        with_retries(store)
        if self.after is not None:
            self.after(spec.id)


#: An assessment, its decisions and the fits it used (:func:`server.assess.assessing.build_assessment`).
Assessed = tuple[AssessmentOut, list[tuple[Run, Recommendation]], dict[int, CurveFit]]
#: How an assessment is computed: :func:`server.assess.assessing.build_assessment`, or the service's one that takes
#: turns with the experiment's job and reuses its last result (:meth:`server.assess.jobs.AssessmentTurns.assess`).
Assess = Callable[[Session, ExperimentSpec, FitCache], Assessed]


@dataclass
class ExperimentRefit:
    """Assess an experiment again when what its assessment reads changed
    (:func:`server.assess.assessing.current_state`):
    fits with intervals (``full`` snapshots of the runs whose fit changed), recommendations, and the stored
    assessment every surface reads, in one short transaction after the fitting (computed by ``assess``).

    A run's full snapshot is stored once per state of what its fit reads (``fitted`` remembers :func:`fit_key` per
    run; in a grid-fitted experiment once per state of the whole grid, since the joint fit reads every run). An
    experiment whose stored assessment already has the current state is not assessed again (also after a restart:
    the state is stored with the assessment) unless a run's full snapshot is still to be stored.
    """

    engine: Engine
    sessions: sessionmaker[Session]
    cache: FitCache
    factors: Sequence[float]
    assess: Assess = build_assessment
    fitted: dict[int, tuple[object, ...]] = field(default_factory=dict, init=False)

    def __call__(self, experiment_id: int, attempt: int = 0) -> None:
        # 1. Fit and decide outside any write transaction (reads in autocommit): slow fits never hold locks.
        with read_session(self.engine) as reader:
            experiment = reader.get(Experiment, experiment_id)
            if experiment is None:
                return
            spec = ExperimentSpec.of(experiment)
            runs = reader.scalars(select(Run).where(Run.experiment_id == experiment_id).order_by(Run.id)).all()
            keys = {run.id: fit_key(run, spec) for run in runs}
            changed = {rid: key for rid, key in keys.items() if self.fitted.get(rid) != key}
            stored = reader.get(StoredAssessment, experiment_id)
            if not changed and stored is not None and stored.state == current_state(spec, runs):
                return
            if changed and grid_fitted(spec, len(runs)):
                # A joint fit moves every run's fit when one run's points change: every snapshot follows.
                changed = dict(keys)
            assessment, decided, fits = self.assess(reader, spec, self.cache)
        # 2. Store the assessment, the snapshots and the recommendations in one short transaction.
        with self.sessions.begin() as session:
            experiment = session.get(Experiment, experiment_id)
            if experiment is None:
                return
            snapshots = {rid: fits[rid] for rid in changed if rid in fits}
            # the recommendations under the experiment's policy as it is now
            replaced = store(
                session, ExperimentSpec.of(experiment), assessment, decided, snapshots, self.factors
            ).replaced
        if not replaced:  # an assessment that read newer data was stored meanwhile: it stands; assess again from
            if attempt < 2:  # now on, so that the fits' snapshots are stored too
                self(experiment_id, attempt + 1)
            return
        self.fitted.update(changed)


class IntervalRefitter:
    """One daemon thread that processes dirty keys (experiment or run ids); ``submit`` never blocks the caller.

    Invariant: a key's work starts at most once every ``min_seconds`` (start to start), however often it is
    submitted, also while its work runs; :meth:`drain` makes every pending key due at once."""

    def __init__(
        self,
        work: Callable[[int], None],
        min_seconds: float,
        notify: Callable[[], None] | None = None,
        name: str = "interval refit of experiment",
    ) -> None:
        self._work = work
        self._name = name
        self._min_seconds = min_seconds
        self._notify = notify
        self._cond = threading.Condition()
        self._due: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._busy = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (again after :meth:`stop`); a no-op while it runs."""
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopped = False
            thread_name = "scalerl-" + self._name.split()[0] + "-refitter"
            self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)
            self._thread.start()

    def submit(self, key: int) -> None:
        with self._cond:
            if key not in self._due:
                last = self._last.get(key)
                now = time.monotonic()
                self._due[key] = now if last is None else max(now, last + self._min_seconds)
                self._cond.notify_all()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until no run is pending or being refitted; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            for key in self._due:
                self._due[key] = time.monotonic()
            self._cond.notify_all()
            while self._due or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def lag(self) -> tuple[int, float]:
        """(keys due now, seconds the longest-due of them has waited past its due time): readiness reports it."""
        with self._cond:
            now = time.monotonic()
            due = [t for t in self._due.values() if t <= now]
            return len(due), (now - min(due)) if due else 0.0

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
                    key = min(ready, key=self._due.__getitem__)
                    del self._due[key]
                    # Counted from the start: a key submitted while its work runs is due min_seconds after this.
                    self._last[key] = now
                    self._busy = True
                    return key
                wait = min(self._due.values()) - now if self._due else None
                self._cond.wait(wait)
            return None

    def _loop(self) -> None:
        while (key := self._next()) is not None:
            try:
                self._work(key)
            except Exception:  # a failed refit must not kill the thread; the next batch retries
                log.exception("%s %s failed", self._name, key)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
            if self._notify is not None:
                self._notify()


def reap_once(sessions: sessionmaker[Session], notifier: Notifier, silent_after_heartbeats: float = 6.0) -> list[int]:
    """One sweep: runs whose worker's lease expired, and runs of their own trainers that went silent, become
    ``lost``; returns their ids."""
    with sessions.begin() as session:
        lost = reap_expired(session) + reap_silent(session, silent_after_heartbeats)
    if lost:
        notifier.notify()
    return lost
