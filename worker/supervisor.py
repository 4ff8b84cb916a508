"""The supervisor (runs in ``cpu`` workers): automatic retries of lost runs, messages for queued runs, and alert
deliveries. Every tick:

1. A ``lost`` run (its worker missed its heartbeats, or shut down) goes back to ``queued`` while fewer than
   ``max_attempts`` of its starts failed (starts minus the releases of workers that shut down: a deploy is not a
   failure); the next attempt resumes from its checkpoint. Past the limit, or when it was being stopped on
   request, it stays ``lost`` (its ``run_lost`` alert was raised when it was lost).
2. Each queued run gets one ``execute_run`` message per time it was queued; a run still queued
   ``redispatch_seconds`` after its message gets another (messages lost with a broker that restarted empty).
   Extra messages are harmless: a task that finds nothing to claim just ends.
3. When alert deliveries are due, one ``deliver_alerts`` task is queued (at most every ``DELIVERY_PERIOD``).

Invariant: the supervisor holds no state that matters: several supervisors, or one restarted, only cause extra
messages, never a run executed twice (that is the lease's job).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from server.alerts.delivery import due_ids
from server.lifecycle.runs import transition
from server.store.models import Run, RunTransition, utcnow

log = logging.getLogger("scalerl.supervisor")
ACTOR = "supervisor"
DELIVERY_PERIOD = 5.0


@dataclass(frozen=True)
class Tick:
    retried: list[int]
    dispatched: list[int]
    deliveries: bool


class Supervisor:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        publish_run: Callable[[], None],
        publish_delivery: Callable[[], None],
        *,
        max_attempts: int,
        redispatch_seconds: float,
    ) -> None:
        self.sessions = sessions
        self.publish_run = publish_run
        self.publish_delivery = publish_delivery
        self.max_attempts = max_attempts
        self.redispatch_seconds = redispatch_seconds
        self._published: dict[tuple[int, datetime], float] = {}
        self._last_delivery = -DELIVERY_PERIOD

    def tick(self) -> Tick:
        return Tick(self._retry_lost(), self._dispatch(), self._deliveries())

    def run_forever(self, stop: threading.Event, interval: float) -> None:
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # the database or broker is restarting: next tick
                log.exception("supervisor tick failed")
            stop.wait(interval)

    def _retry_lost(self) -> list[int]:
        retried = []
        with self.sessions.begin() as session:
            lost = session.scalars(select(Run).where(Run.status == "lost").order_by(Run.id).with_for_update()).all()
            for run in lost:
                failed = run.attempts - run.releases
                if failed >= self.max_attempts or self._was_stopping(session, run.id):
                    continue
                reason = (
                    f"automatic retry from the last checkpoint ({failed} of {self.max_attempts} starts failed), "
                    f"after: {run.status_reason}"
                )
                transition(session, run, "queued", reason[:2000], ACTOR)
                retried.append(run.id)
        if retried:
            log.info("re-queued lost runs %s", retried)
        return retried

    @staticmethod
    def _was_stopping(session: Session, run_id: int) -> bool:
        """A run asked to stop whose worker was lost is not restarted (it stays ``lost``)."""
        last = session.scalar(
            select(RunTransition.from_status)
            .where(RunTransition.run_id == run_id)
            .order_by(RunTransition.id.desc())
            .limit(1)
        )
        return last == "stopping"

    def _dispatch(self) -> list[int]:
        now = time.monotonic()
        with self.sessions() as session:
            queued = session.execute(select(Run.id, Run.updated_at).where(Run.status == "queued").order_by(Run.id))
            keys = [(int(r.id), r.updated_at) for r in queued]
        sent = []
        for key in keys:
            at = self._published.get(key)
            if at is None or now - at > self.redispatch_seconds:
                self.publish_run()
                self._published[key] = now
                sent.append(key[0])
        current = set(keys)
        self._published = {k: v for k, v in self._published.items() if k in current}
        return sent

    def _deliveries(self) -> bool:
        now = time.monotonic()
        if now - self._last_delivery < DELIVERY_PERIOD:
            return False
        with self.sessions() as session:
            due = bool(due_ids(session, utcnow(), 1))
        if due:
            self.publish_delivery()
            self._last_delivery = now
        return due
