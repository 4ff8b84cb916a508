"""The Celery application: queues, routing and the settings long GPU runs need.

- ``gpu`` queue: ``scalerl.execute_run``; run one worker process per GPU (``scalerl worker --queues gpu``: solo
  pool, concurrency 1, prefetch 1, acks late).
- ``cpu`` queue: ``scalerl.deliver_alerts``; its workers also run the supervisor (dispatch and automatic retries).
- Messages carry no run state: ``execute_run`` claims the oldest queued run under a lease, so a redelivered or
  duplicated message never executes a run twice. ``task_reject_on_worker_lost`` requeues the message of a worker
  that died; the run's attempt counter in the database bounds the retries.
- The embedded broker is kombu's SQLAlchemy transport on SQLite; its polling interval is lowered on the class
  (passing ``polling_interval`` through ``broker_transport_options`` would be forwarded to ``create_engine``).
  It has no fanout, so remote control is off; cancellation never uses ``revoke`` (the database drives it).
"""

from __future__ import annotations

from celery import Celery
from kombu.entity import Exchange, Queue

from worker.settings import WorkerSettings

EXECUTE_RUN = "scalerl.execute_run"
DELIVER_ALERTS = "scalerl.deliver_alerts"
GPU_QUEUE = "gpu"
CPU_QUEUE = "cpu"
SQLA_POLLING_SECONDS = 0.05


def _queue(name: str) -> Queue:
    """A queue bound to its own direct exchange with its own name as routing key."""
    return Queue(name, Exchange(name, type="direct"), routing_key=name)  # type: ignore[no-untyped-call]


def make_celery(settings: WorkerSettings) -> Celery:
    if settings.broker_kind == "sqla":
        import kombu.transport.sqlalchemy

        kombu.transport.sqlalchemy.Transport.polling_interval = SQLA_POLLING_SECONDS
        settings.home.mkdir(parents=True, exist_ok=True)
    app = Celery("scalerl", broker=settings.broker_url, include=["worker.tasks"])
    transport: dict[str, object] = {}
    if settings.broker_kind == "redis":
        transport = {"visibility_timeout": settings.visibility_timeout}
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_queues=(_queue(GPU_QUEUE), _queue(CPU_QUEUE)),
        task_default_queue=CPU_QUEUE,
        task_routes={
            EXECUTE_RUN: {"queue": GPU_QUEUE, "routing_key": GPU_QUEUE},
            DELIVER_ALERTS: {"queue": CPU_QUEUE, "routing_key": CPU_QUEUE},
        },
        broker_transport_options=transport,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_enable_remote_control=settings.broker_kind == "redis",
        worker_send_task_events=False,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    return app
