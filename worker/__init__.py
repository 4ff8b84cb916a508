"""Workers: Celery tasks that execute queued runs with the engine (``gpu`` queue) and supervise the queue and
deliver alerts (``cpu`` queue). Run state lives in the service's database; messages only say "there is work"."""
