"""The training-loop side: buffer points, send them in batches from a background thread, relay the action.

Invariants:
- ``log()`` only validates and enqueues: it never does network I/O, never blocks on the service and never raises
  because of it (a bad *value*, e.g. a pass rate of 1.7, is a ``ValueError`` at the call, as a bug should be).
- Points are keyed by step. Logging a step that is still waiting to be sent merges it into the waiting point
  (compute and pass rate: the later value; metrics: united), so an evaluation logged after the training metrics
  of the same step travels as one point. A point is removed from the buffer only after the service stored it
  (accepted, duplicate or rejected); resending is harmless because the service is idempotent by ``(run, step)``.
- While the service is unreachable (connection refused, timeout, 429, 5xx) the buffer keeps everything (up to
  ``max_buffer`` points; the oldest are dropped beyond that, with a warning), the thread retries with the client's
  one retry policy (:class:`~scalerl.client.retry.Backoff`: ``backoff`` doubling up to ``max_backoff``, at least
  the service's ``Retry-After`` within that cap), and the ``scalerl.client`` logger says so once per outage
  and again when the buffered points were delivered. A refused request (4xx) is not retried: the batch is dropped
  and ``last_error`` says why.
- ``action`` is the service's latest answer (``continue`` until told otherwise). A point logged into an empty buffer
  wakes the thread, so with a loop that logs every step the points leave every ``flush_interval`` seconds and a
  stop reaches the loop within ``flush_interval`` plus one step. When nothing is sent for ``poll_interval``
  seconds (default 5) the thread reads the run, so a stop reaches a loop that logs rarely too.
- If no ``run_id`` is given, the run is registered (or attached to, by key or name, per ``resume``: see
  :meth:`Client.register_run`) when the reporter starts, as ``wandb.init`` does: a refusal (``resume="never"`` on a
  run that exists, ``"must"`` on none, a bad token, another compute unit) raises :class:`ApiError` there, before any
  training. A service that cannot be reached does not fail the start: the background thread registers once it can.
  ``name`` is then the name the service gave (``<name>-2`` for a new run beside a live or ended one).
- While nothing is sent for ``poll_interval`` seconds the thread sends a heartbeat (a trainer of its own) or reads the
  run, so the service tells a silent trainer (crashed, killed) from a slow one: a run that misses several heartbeats
  becomes ``lost`` with an alert, and ``running`` again when it reports.
- Write-ahead: every point is written to the reporter's folder in ``offline_dir`` (default ``~/.scalerl/offline``;
  :mod:`scalerl.client.runlog`) before ``log()`` returns, and forgotten there once the service stored it, so a
  process killed outright (``kill -9``, OOM) loses no point ``scalerl sync`` cannot send; the folder is removed when
  the run finished with everything stored. What :meth:`finish` could not deliver stays there with the final status
  (``mode="offline"`` never connects: its folder, with a key of its own, is the run), and ``scalerl sync DIR``
  sends it later, exactly once (:mod:`scalerl.client.offline`).
- The process's end finishes the run (:mod:`scalerl.client.exits`): SIGTERM/SIGHUP with the trainer's own handler
  (installed before or after the reporter) are recorded, the buffer is sent and the trainer's handler runs: the run
  ends ``stopped`` when the process ends (or at :meth:`finish`); without a handler, ``failed`` and the signal ends
  the process; an uncaught exception ``failed``; a plain exit without :meth:`finish` the default status. ``_cond``
  is re-entrant: the signal handler's flush may land inside ``log()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from scalerl.client import exits
from scalerl.client.api import (
    Action,
    ApiError,
    Client,
    FinalStatus,
    Forecast,
    MetricsAnswer,
    Point,
    ResumePolicy,
    ScalerlError,
    ServiceUnavailable,
)
from scalerl.client.retry import Backoff
from scalerl.client.runlog import RunLog, default_dir, new_key

log = logging.getLogger("scalerl.client")


class Reporter:
    """Report a run's points to the service from a background thread. See the module docstring."""

    def __init__(
        self,
        client: Client,
        *,
        run_id: int | None = None,
        name: str | None = None,
        registration: Mapping[str, Any] | None = None,
        batch_size: int = 500,
        flush_interval: float = 2.0,
        poll_interval: float = 5.0,
        backoff: float = 0.5,
        max_backoff: float = 60.0,
        max_buffer: int = 100_000,
        resume: ResumePolicy = "auto",
        handle_signals: bool = True,
        mode: Literal["online", "offline"] = "online",
        offline_dir: str | Path | None = None,
        key: str | None = None,
    ) -> None:
        if run_id is None and name is None:
            raise ValueError("give the run's id (run_id=) or a name to register it under (name=)")
        if mode not in ("online", "offline"):
            raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
        if mode == "offline" and name is None:
            raise ValueError("an offline reporter needs the run's name (name=): it is registered by scalerl sync")
        self.client = client
        self.run_id = run_id
        self.name = name
        self._registration = dict(registration or {})
        #: The run's identity sent with its registration (W&B's run id): the one given, or, offline, one of its own.
        self.key = key if key is not None or mode == "online" else new_key()
        self.resume: ResumePolicy = resume
        #: The heartbeat this reporter promises the service (its thread polls every ``poll_interval``; the service
        #: takes the run for crashed after several missed ones, so a trainer holding the GIL for a while is not).
        self.heartbeat_seconds = max(10.0, float(poll_interval))
        self.batch_size = max(1, min(batch_size, 10_000))
        self.flush_interval = flush_interval
        self.poll_interval = poll_interval
        self._backoff = Backoff(cap=max_backoff, base=backoff)
        self.max_buffer = max_buffer

        self._cond = threading.Condition()
        self._pending: dict[int, Point] = {}
        self._inflight: dict[int, Point] = {}
        self._flush_now = False
        self._closing = False
        self._finished = False
        self._refused_for_good = False
        self._last_contact = time.monotonic()
        self._dropped = 0

        self.action: Action = "continue"
        self.status: str | None = None
        self.last_fit: Forecast | None = None
        self.last_answer: MetricsAnswer | None = None
        self.last_error: str | None = None
        self.connected: bool | None = None  # None: not tried yet
        self.delivered = 0
        self.rejected: list[dict[str, Any]] = []

        self.mode = mode
        registered = {**self._registration, "run_id": run_id}
        root = Path(offline_dir) if offline_dir else default_dir()
        folder_key = self.key or new_key()
        self.runlog = RunLog(root, str(name or run_id), folder_key, registered, resume, max_points=max_buffer)
        if self.key is not None:
            self._registration["key"] = self.key
        self._thread = threading.Thread(target=self._run, name="scalerl-reporter", daemon=True)
        if mode == "online" and run_id is None:
            self._register_now()
        if mode == "online":
            self._thread.start()
        exits.track(self, handle_signals=handle_signals)

    @property
    def backoff(self) -> float:
        """Seconds before the first retry of an outage (doubling up to :attr:`max_backoff`)."""
        return self._backoff.base

    @property
    def max_backoff(self) -> float:
        return self._backoff.cap

    @classmethod
    def start(
        cls,
        name: str,
        *,
        url: str | None = None,
        token: str | None = None,
        timeout: float = 10.0,
        experiment_id: int | None = None,
        budget: float | None = None,
        task: str | None = None,
        model: str | None = None,
        seed: int | None = None,
        experiment: str | None = None,
        compute_unit: str = "gpu_hours",
        config: Mapping[str, Any] | None = None,
        tags: list[str] | None = None,
        notes: str | None = None,
        **options: Any,
    ) -> Reporter:
        """Register (or attach to, per ``resume=``, default ``"auto"``, and ``key=``, the run's identity) the run
        ``name`` and report to it; raises :class:`ApiError` when the service refuses (``resume="never"`` on a run
        that exists, ``"must"`` on none: the message says which).
        ``experiment``: the name of the experiment to join (created if missing, measuring compute in
        ``compute_unit``), instead of ``experiment_id``. ``config``/``tags``/``notes``: the run's description (shown
        beside it; its comparison cards say which config keys differ). ``options``: the constructor's tuning."""
        if experiment is not None and experiment_id is not None:
            raise ValueError("give experiment= (a name) or experiment_id=, not both")
        registration = {
            "experiment_id": experiment_id,
            "budget": budget,
            "task": task,
            "model": model,
            "seed": seed,
            "config": dict(config) if config else None,
            "tags": tags,
            "notes": notes,
        }
        if experiment is not None:
            registration.update(experiment=experiment, compute_unit=compute_unit)
        client = Client(url, token, timeout=timeout)
        try:
            return cls(client, name=name, registration=registration, **options)
        except BaseException:
            client.close()  # refused at start: no connection left behind
            raise

    @classmethod
    def attach(
        cls, run_id: int, *, url: str | None = None, token: str | None = None, timeout: float = 10.0, **options: Any
    ) -> Reporter:
        """Report to an existing run by id."""
        return cls(Client(url, token, timeout=timeout), run_id=run_id, **options)

    def wait_for_run(self, timeout: float) -> int | None:
        """The run's id once the background thread has registered (or attached to) it; ``None`` if that has not
        happened within ``timeout`` seconds (e.g. the service is unreachable)."""
        with self._cond:
            self._cond.wait_for(lambda: self.run_id is not None, timeout=timeout)
            return self.run_id

    # ---- the training loop's side ---------------------------------------------------------------------------

    @property
    def should_stop(self) -> bool:
        """True once the service answered ``action: stop``."""
        return self.action == "stop"

    @property
    def refused(self) -> bool:
        """True once the service refused this reporter for good (bad token, no such run, an invalid registration
        such as an experiment of another compute unit): nothing more is sent; ``last_error`` says why."""
        return self._fatal

    @property
    def buffered(self) -> int:
        """Points not yet stored by the service."""
        with self._cond:
            return len(self._pending) + len(self._inflight)

    def log(
        self,
        step: int,
        compute: float,
        pass_rate: float | None = None,
        metrics: Mapping[str, Any] | None = None,
        **named: Any,
    ) -> Action:
        """Queue one point (non-blocking) and return the latest known action."""
        exits.keep_chained()  # a signal handler the trainer installed after the reporter is wrapped, not lost
        point = Point.make(step, compute, pass_rate, {**(metrics or {}), **named})
        with self._cond:
            if self._finished:
                raise ScalerlError("this reporter has finished; start a new one")
            if self.mode == "offline":
                self.runlog.append([point])
                return self.action
            if self._fatal:
                return self.action
            self.runlog.append([point])
            was_empty = not self._pending
            old = self._pending.get(point.step)
            self._pending[point.step] = old.merged(point) if old is not None else point
            if len(self._pending) + len(self._inflight) > self.max_buffer:
                oldest = next(iter(self._pending))
                del self._pending[oldest]
                self.runlog.stored([oldest])
                self._dropped += 1
                if self._dropped == 1 or self._dropped % 1000 == 0:
                    log.warning("scalerl: buffer full (%d points); dropped %d oldest", self.max_buffer, self._dropped)
            if was_empty or len(self._pending) >= self.batch_size:
                # Wake the thread: with an empty buffer it sleeps until the next poll, and the first point must
                # leave within ``flush_interval`` (its answer carries the service's action).
                self._cond.notify_all()
        return self.action

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Ask for an immediate send and wait until every buffered point is stored (True) or ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_now = True
            self._backoff.next_at = 0.0  # try now (the failures so far still count)
            self._cond.notify_all()
            while self._pending or self._inflight or self._fatal:
                if self._fatal:
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(timeout=0.5 if left is None else min(left, 0.5))
            return True

    def finish(self, status: FinalStatus | None = None, reason: str | None = None, *, timeout: float = 30.0) -> bool:
        """Flush (at most ``timeout`` seconds), stop the thread and report the final status (default: ``stopped``
        if the service asked to stop, else ``succeeded``). Returns True if everything was delivered and the
        status stored; never raises for a network problem (``last_error`` says what went wrong)."""
        if self._finished:
            return False
        exits.untrack(self)
        self.last_error = None  # what went wrong before is not this finish's outcome
        preempted = exits.received() is not None and not self.should_stop
        status = status or ("stopped" if self.should_stop or preempted else "succeeded")
        if reason is None:
            if status != "stopped":
                reason = f"trainer finished ({status})"
            else:
                signalled = exits.ended_by_signal_reason() if preempted else None
                reason = signalled or "the service asked to stop"
        if self.mode == "offline":
            self._finished = True
            self.runlog.end(status, reason)
            log.warning("scalerl: run %s kept offline in %s; send it with: scalerl sync %s", self.name,
                        self.runlog.path, self.runlog.path)  # fmt: skip
            return True
        start = time.monotonic()
        delivered = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._finished = True
            self._cond.notify_all()
        self._thread.join(timeout=max(1.0, timeout - (time.monotonic() - start)))
        ok = delivered
        keep = not delivered  # points the service did not store: kept for `scalerl sync`
        if self.run_id is None:
            self.last_error = self.last_error or "the run was never registered (service unreachable)"
            ok, keep = False, True
        elif self.status == status:
            pass  # already there (the service stopped a run that no worker holds at once)
        else:
            try:
                info = self.client.report_status(self.run_id, status, reason)
                self.status = info.status
            except ScalerlError as exc:
                self.last_error = str(exc)
                log.warning("scalerl: could not report status %r: %s", status, exc)
                ok = False
                # Unreachable: the status is kept to send later; refused (e.g. 409) or a closed client: sending it
                # again changes nothing.
                keep = keep or isinstance(exc, ServiceUnavailable)
        if keep:
            self._keep_offline(status, reason)
        else:
            self.runlog.remove()
        return ok  # the client stays open for forecast() after the run

    def _keep_offline(self, status: str, reason: str) -> None:
        """Keep what the service did not store (its points are in the folder already) with the final status, for
        ``scalerl sync``."""
        with self._cond:
            left = len(self._inflight) + len(self._pending)
        if self._fatal and not left:
            self.runlog.remove()  # refused for good (bad token, ...): nothing was kept to send later
            return
        self.runlog.end(status, reason)
        log.warning(
            "scalerl: %d points and the status %r of run %s were not delivered (%s); kept in %s: send them with "
            "scalerl sync %s",
            left,
            status,
            self.name or self.run_id,
            self.last_error or "service unreachable",
            self.runlog.path,
            self.runlog.path,
        )

    def close(self, *, timeout: float = 30.0) -> bool:
        """Flush (at most ``timeout`` seconds) and stop the thread without reporting a status (an observer such as
        ``scalerl watch`` does not know how the job ended). True if everything was delivered."""
        if self._finished:
            return False
        exits.untrack(self)
        if self.mode == "offline":
            self._finished = True
            self.runlog.release()
            return True
        delivered = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._finished = True
            self._cond.notify_all()
        self._thread.join(timeout=5.0)
        if delivered:
            self.runlog.remove()
        else:
            self.runlog.release()  # kept: scalerl sync sends what is left
        return delivered

    def update(
        self,
        *,
        config: Mapping[str, Any] | None = None,
        summary: Mapping[str, Any] | None = None,
        tags: list[str] | None = None,
        notes: str | None = None,
        timeout: float = 10.0,
    ) -> bool:
        """Change the run's description now (one request; see :meth:`Client.update_run`), e.g.
        ``rep.update(summary={"best_pass_rate": 0.71})`` at the end. False (and ``last_error``) when the run is not
        registered within ``timeout`` or the service refused it."""
        run_id = self.wait_for_run(timeout)
        if run_id is None:
            self.last_error = "the run is not registered yet (service unreachable?)"
            return False
        try:
            self.client.update_run(run_id, config=config, summary=summary, tags=tags, notes=notes)
        except ScalerlError as exc:
            self.last_error = str(exc)
            return False
        return True

    def forecast(self, wait: float = 10.0) -> Forecast | None:
        """The run's current forecast from the service: the fit that has seen the most points (the one with
        intervals when it is as current); ``None`` if unavailable. Waits up to ``wait`` seconds for a refit of
        points the service stored but has not fitted yet (right after :meth:`finish`), else returns the stored one."""
        if self.run_id is None:
            return self.last_fit
        try:
            return self.client.forecast(self.run_id, wait=wait)
        except ScalerlError:
            return self.last_fit

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.finish("failed" if exc is not None else None, None if exc is None else f"trainer raised {exc!r}"[:2000])

    # ---- the background thread ------------------------------------------------------------------------------

    @property
    def _fatal(self) -> bool:
        return self._refused_for_good

    def _run(self) -> None:
        last_send = time.monotonic()
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._closing:
                        return
                    if self._fatal:
                        self._cond.wait(timeout=1.0)
                        continue
                    due = bool(self._pending) and (
                        self._flush_now
                        or len(self._pending) >= self.batch_size
                        or now - last_send >= self.flush_interval
                    )
                    poll = now - self._last_contact >= self.poll_interval
                    if (due or poll or (self.run_id is None and not self._fatal)) and now >= self._backoff.next_at:
                        break
                    wake = min(
                        last_send + self.flush_interval if self._pending else now + self.poll_interval,
                        self._last_contact + self.poll_interval,
                    )
                    self._cond.wait(timeout=max(0.01, max(wake, self._backoff.next_at) - now))
                batch: list[Point] = []
                if self.run_id is not None and self._pending:
                    for step in list(self._pending)[: self.batch_size]:
                        self._inflight[step] = self._pending.pop(step)
                    batch = list(self._inflight.values())
            try:
                if self.run_id is None:
                    self._register()
                    continue
                if batch:
                    self._send(batch)
                    last_send = time.monotonic()
                else:
                    self._poll()
                self._contact_ok()
            except ServiceUnavailable as exc:
                self._unreachable(exc)
            except ApiError as exc:
                self._refused(exc, len(batch))
            except Exception as exc:  # never let the thread die: the loop must keep its buffer
                self._unreachable(ServiceUnavailable(f"unexpected error: {exc!r}"))
            finally:
                with self._cond:
                    for step, point in self._inflight.items():  # not stored: back in front of the queue
                        later = self._pending.pop(step, None)
                        self._pending = {step: point.merged(later) if later else point, **self._pending}
                    self._inflight.clear()
                    if not self._pending:
                        self._flush_now = False
                    self._cond.notify_all()

    def _register_now(self) -> None:
        """Register in the caller's thread (a refusal raises there, before training); an unreachable service is
        left to the background thread."""
        try:
            self._register()
        except ServiceUnavailable as exc:
            self._unreachable(exc)
        except ApiError:
            self.runlog.remove()
            raise

    def _register(self) -> None:
        reg = {k: v for k, v in self._registration.items() if v is not None}
        info = self.client.register_run(
            str(self.name), resume=self.resume, heartbeat_seconds=self.heartbeat_seconds, **reg
        )
        if info.name != self.name:
            log.warning(
                "scalerl: run %r has ended or another live process reports to it (resume=%r starts a new run): "
                "reporting to the new run %r; pass resume='allow' (or its key) to continue that one",
                self.name,
                self.resume,
                info.name,
            )
        with self._cond:
            self.name = info.name
            self.run_id = info.id
            self.action = info.action
            self.status = info.status
            self.runlog.registered(info.id, info.name)
            self._cond.notify_all()
        log.info("scalerl: reporting to run %s (id %d) at %s", info.name, info.id, self.client.url)
        self._contact_ok()

    def _send(self, batch: list[Point]) -> None:
        assert self.run_id is not None
        answer = self.client.post_points(self.run_id, batch)
        with self._cond:
            self.runlog.stored(s for s in self._inflight if s not in self._pending)  # a newer version still waits
            self._inflight.clear()
            self.delivered += answer.accepted + answer.duplicates
            self.action = answer.action
            self.status = answer.status
            self.last_answer = answer
            if answer.fit is not None:
                self.last_fit = answer.fit
            if answer.rejected:
                self.rejected.extend(answer.rejected)
                self.last_error = f"{answer.n_rejected} points rejected: {answer.rejected[0]}"
                log.warning("scalerl: the service rejected %d points: %s", answer.n_rejected, answer.rejected[:3])

    def _poll(self) -> None:
        if self.run_id is None:
            return
        try:
            info = self.client.heartbeat(self.run_id, self.heartbeat_seconds)
        except ApiError as exc:
            if exc.status_code != 409:  # 409: ended, or a worker's leased run: read it instead
                raise
            info = self.client.run_info(self.run_id)
        with self._cond:
            self.action = info.action
            self.status = info.status

    def _contact_ok(self) -> None:
        with self._cond:
            if self.connected is False:
                log.warning(
                    "scalerl: the service at %s is reachable again; %d points waiting",
                    self.client.url,
                    len(self._pending) + len(self._inflight),
                )
            self.connected = True
            self._backoff.ok()
            self._last_contact = time.monotonic()

    def _unreachable(self, exc: ScalerlError) -> None:
        with self._cond:
            # The service's Retry-After (a 503 while its database restarts) lengthens the wait, capped.
            self._backoff.fail(time.monotonic(), getattr(exc, "retry_after", None))
            self.last_error = str(exc)
            buffered = len(self._pending) + len(self._inflight)
            if self.connected is not False:
                log.warning(
                    "scalerl: service unavailable (%s); buffering %d points and retrying (back-off up to %.0fs)",
                    exc,
                    buffered,
                    self.max_backoff,
                )
            self.connected = False
            self._last_contact = time.monotonic()  # do not poll while down: the retries do

    def _refused(self, exc: ApiError, n: int) -> None:
        with self._cond:
            self.last_error = str(exc)
            if self.run_id is None or exc.status_code in (401, 403, 404):
                # Nothing this reporter sends can succeed (bad token, no such run, invalid registration).
                self._refused_for_good = True
                self.runlog.stored([*self._pending, *self._inflight])
                self._pending.clear()
                self._inflight.clear()
                log.error("scalerl: the service refused this reporter (%s); points will not be sent", exc)
                return
            self.runlog.stored(s for s in self._inflight if s not in self._pending)
            self._inflight.clear()  # a refused batch is dropped, not retried
            log.error("scalerl: the service refused a batch of %d points: %s", n, exc)
