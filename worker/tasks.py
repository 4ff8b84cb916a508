"""The Celery tasks and the worker's process hooks (shutdown flag, supervisor thread).

``app`` is configured from :class:`~worker.settings.WorkerSettings` when this module is imported (the CLI sets the
environment first).
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from typing import Any

from celery import Task
from celery.exceptions import Reject
from celery.signals import worker_ready, worker_shutting_down
from sqlalchemy.orm import Session, sessionmaker

from scalerl.client.api import ServiceUnavailable
from worker.celery_app import DELIVER_ALERTS, EXECUTE_RUN, make_celery
from worker.client import connect
from worker.executor import RunExecutor
from worker.settings import WorkerSettings

log = logging.getLogger("scalerl.worker")


@lru_cache(maxsize=1)
def settings() -> WorkerSettings:
    return WorkerSettings()


app = make_celery(settings())
SHUTDOWN = threading.Event()
_supervise = threading.Event()
_supervisor_stop = threading.Event()


@lru_cache(maxsize=1)
def sessions() -> sessionmaker[Session]:
    from server.alerts.hooks import install
    from server.store.db import make_engine, session_factory

    install()
    return session_factory(make_engine(settings().database_url))


def enable_supervisor() -> None:
    """Run the supervisor thread in this worker once it is ready (``cpu`` workers)."""
    _supervise.set()


@worker_shutting_down.connect  # type: ignore[untyped-decorator]
def _on_shutdown(**_: Any) -> None:
    SHUTDOWN.set()
    _supervisor_stop.set()


@worker_ready.connect  # type: ignore[untyped-decorator]
def _on_ready(**_: Any) -> None:
    if not _supervise.is_set():
        return
    from worker.supervisor import Supervisor

    cfg = settings()
    supervisor = Supervisor(
        sessions(),
        lambda: app.send_task(EXECUTE_RUN),
        lambda: app.send_task(DELIVER_ALERTS),
        max_attempts=cfg.max_attempts,
        redispatch_seconds=cfg.redispatch_seconds,
    )
    thread = threading.Thread(
        target=supervisor.run_forever, args=(_supervisor_stop, cfg.supervise_seconds), name="scalerl-supervisor"
    )
    thread.daemon = True
    thread.start()
    log.info("supervisor started (every %.1f s)", cfg.supervise_seconds)


@app.task(  # type: ignore[untyped-decorator]
    name=EXECUTE_RUN, bind=True, max_retries=None, acks_late=True, reject_on_worker_lost=True
)
def execute_run(self: Task) -> str:
    """Claim the oldest queued run and execute it to the end (see :mod:`worker.executor`)."""
    if SHUTDOWN.is_set():
        raise Reject("worker shutting down", requeue=True)
    cfg = settings()
    client = connect(cfg)
    try:
        return RunExecutor(cfg, client, SHUTDOWN).claim_and_execute()
    except ServiceUnavailable as exc:
        log.warning("server unreachable (%s); retrying this message", exc)
        raise self.retry(countdown=10, exc=exc) from None
    finally:
        client.close()


@app.task(name=DELIVER_ALERTS, acks_late=True)  # type: ignore[untyped-decorator]
def deliver_alerts() -> int:
    """Send every due alert delivery once (failures are rescheduled with back-off)."""
    from server.alerts.delivery import deliver_due

    return deliver_due(sessions())
