"""Executing one run: claim it, start the engine in its own process group, stream its points, heartbeat, stop it
cooperatively, and report how it ended.

Invariants:
- A run is executed only under a lease from ``POST /runs/claim``; every write carries the lease id, so a worker
  whose lease was taken away (the run was marked lost and retried elsewhere) cannot write anymore, and stops.
- Points are read from the engine's ``metrics.jsonl`` (durable before they are sent) and sent in step order;
  only steps above the service's ``last_step`` at claim time are sent, so a resumed attempt continues the curve
  without duplicates. A batch that fails (server restarting, network) is retried with the client's one back-off
  (:mod:`scalerl.client.retry`, honouring ``Retry-After``) and nothing is skipped; after the engine exited, the
  remaining points are retried for ``drain_seconds``.
- The service is reached through :class:`scalerl.client.Client` only. Its :class:`ServiceUnavailable` (network,
  5xx, 429) is retried; an :class:`ApiError` 409 on a lease call means the lease is lost (another attempt owns the
  run, or it left the leased states); any other :class:`ApiError` is a refusal that retrying cannot change.
- Stopping is SIGTERM to the engine (it checkpoints at its next step boundary), then SIGKILL of its process group
  after ``stop_grace_seconds``. The process group is always killed once the engine leader exited.
- With a run storage (``run_storage``, worker/run_sync.py): before the engine starts, the run directory gets the
  newest checkpoint in storage when it is newer than its own; each new checkpoint is uploaded while the engine runs,
  and the last one before the attempt's status is reported. Storage that cannot be read releases the run (``lost``),
  never starts it from scratch.
- How it ended: ``succeeded``/``failed``/``stopped`` as the engine says (a crash without a status is ``failed``
  with the log's last lines); a worker shutting down reports ``lost`` (the supervisor re-queues it from its
  checkpoint); a lost lease reports nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from rl_core.contracts.points import MetricPoint, MetricsTail
from rl_core.contracts.run_dir import ENGINE_LOG, RunDir, service_run_dir
from scalerl.client.api import ApiError, Client, MetricsAnswer, ServiceUnavailable
from scalerl.client.retry import Backoff, retrying
from worker.client import lease_lost
from worker.engine_config import EngineConfigError, engine_config, load_template, prepare_run_dir
from worker.run_sync import RunSync
from worker.settings import WorkerSettings
from worker.storage import RunStorage, StorageError

log = logging.getLogger("scalerl.worker")
StopCause = Literal["server", "shutdown", "lease_lost"]
REQUEST_FILE = "engine-request.yaml"


@dataclass
class Attempt:
    """State of one leased execution."""

    run: dict[str, Any]
    lease_id: str
    run_dir: Path
    acked_step: int
    cfg: dict[str, Any] = field(default_factory=dict)
    pending: list[MetricPoint] = field(default_factory=list)
    queued_step: int = -1
    stop: StopCause | None = None
    rejected: int = 0
    resume_compute: float | None = None
    """The compute of the service's last stored point at claim time (None: no point stored)."""
    compute_shift: float = 0.0
    reporting: bool = False
    """Set once the final status is being reported: heartbeats end (the lease ends with the status)."""

    @property
    def run_id(self) -> int:
        return int(self.run["id"])

    @property
    def claimed_step(self) -> int:
        """The service's last stored step when this attempt claimed the run (-1: none)."""
        return -1 if self.run.get("last_step") is None else int(self.run["last_step"])


@dataclass(frozen=True)
class EngineExit:
    code: int
    status: str | None
    reason: str
    step: int | None
    killed: bool


def retry(call: Callable[[], Any], deadline: float, cap: float) -> Any:
    """Call until it does not raise :class:`ServiceUnavailable` or the next try would be after ``deadline``
    (monotonic; then re-raise)."""
    return retrying(call, Backoff(cap), deadline)


class Heartbeat:
    """Renews the lease every ``interval`` seconds on its own thread, from the claim until :meth:`stop`, whatever
    the main loop is doing (building the config, waiting on the engine, retrying points); it records a stop
    request or a lost lease on the attempt."""

    def __init__(self, executor: RunExecutor, attempt: Attempt) -> None:
        self.executor = executor
        self.attempt = attempt
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-run-{attempt.run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        s = self.executor.s
        backoff = Backoff(s.max_backoff_seconds)
        while not self._stop.wait(max(s.heartbeat_seconds, backoff.next_at - time.monotonic())):
            if self.attempt.stop == "lease_lost" or self.attempt.reporting:
                return
            self.executor._heartbeat(self.attempt, backoff, time.monotonic())


class RunExecutor:
    def __init__(self, settings: WorkerSettings, client: Client, shutdown: threading.Event) -> None:
        self.s = settings
        self.client = client
        self.shutdown = shutdown
        self.name = settings.worker_name or f"worker@{os.uname().nodename}:{os.getpid()}"

    # ---- entry ----------------------------------------------------------------------------------------------

    def claim_and_execute(self) -> str:
        """Claim the oldest queued run and execute it; a short description of what happened."""
        lease = retry(
            lambda: self.client.claim_run(self.name, self.s.lease_seconds),
            time.monotonic() + 60,
            self.s.max_backoff_seconds,
        )
        if lease is None:
            return "no queued run"
        run = lease["run"]
        attempt = Attempt(
            run=run,
            lease_id=lease["lease_id"],
            run_dir=service_run_dir(self.s.run_root, int(run["id"])),
            acked_step=-1 if run.get("last_step") is None else int(run["last_step"]),
        )
        attempt.queued_step = attempt.acked_step
        if attempt.acked_step >= 0 and run.get("compute_used") is not None:
            attempt.resume_compute = float(run["compute_used"])
        log.info(
            "run %s (%s): attempt %s, resuming after step %s",
            run["id"],
            run["name"],
            run["attempts"],
            attempt.acked_step,
        )
        with Heartbeat(self, attempt):
            return self.execute(attempt)

    def execute(self, attempt: Attempt) -> str:
        """Run the leased attempt to its end (the caller keeps the lease alive with :class:`Heartbeat`)."""
        try:
            attempt.cfg = self._config(attempt.run)
            sync = self._restore(attempt)
            resume = prepare_run_dir(attempt.run_dir, attempt.cfg)
        except StorageError as exc:
            self._finish(attempt, "lost", f"worker {self.name} could not read the run storage: {exc}")
            return f"run {attempt.run_id} released: run storage unreadable"
        except ApiError as exc:
            if lease_lost(exc):
                return f"run {attempt.run_id}: lease lost before start"
            self._finish(attempt, "failed", f"cannot start the engine: {exc}")
            return f"run {attempt.run_id} failed to start"
        except EngineConfigError as exc:
            self._finish(attempt, "failed", f"cannot start the engine: {exc}")
            return f"run {attempt.run_id} failed to start"
        if sync is not None:
            sync.start()
        try:
            while True:
                result = self._run_engine(attempt, resume)
                if attempt.stop is None and result.status == "succeeded" and self._budget_grew(attempt):
                    log.info("run %s: budget extended while it ran; continuing from its checkpoint", attempt.run_id)
                    resume = True
                    continue
                break
        finally:
            if sync is not None:  # before the status: a released run is queued again at once, for any host
                sync.finish(upload=attempt.stop != "lease_lost", timeout=self.s.run_storage_final_seconds)
        return self._conclude(attempt, result)

    # ---- pieces ---------------------------------------------------------------------------------------------

    def _config(self, run: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        experiment = retry(
            lambda: self.client.get_experiment(int(run["experiment_id"]), runs_limit=0),
            deadline,
            self.s.max_backoff_seconds,
        )
        unit = str((experiment.get("document") or {}).get("compute_unit", "gpu_hours"))
        template = load_template(self.s.engine_template)
        return engine_config(
            run,
            unit,
            template,
            device=self.s.engine_device,
            steps=self.s.engine_steps,
            roots=self.s.allowed_data_roots,
        )

    def _restore(self, attempt: Attempt) -> RunSync | None:
        """With a run storage (``run_storage``): the attempt's uploader, after the run directory got storage's newest
        checkpoint where it is newer than the directory's own (worker/run_sync.py)."""
        if not self.s.run_storage:
            return None
        storage = RunStorage(self.s.run_storage, self.s.run_storage_options)
        sync = RunSync(
            storage,
            attempt.run_id,
            attempt.run_dir,
            attempt=int(attempt.run.get("attempts") or 0),
            keep=self.s.run_storage_keep,
            engine_keep=RunSync.engine_keep_of(attempt.cfg),
            poll_seconds=self.s.poll_seconds,
            origin=self.name,
        )
        done = sync.restore_retrying(60.0, self.s.max_backoff_seconds)
        log.info("run %s: %s", attempt.run_id, done)
        return sync

    def _budget_grew(self, attempt: Attempt) -> bool:
        """True (and the config updated) when the run ended on its budget and the budget was extended meanwhile."""
        try:
            run = self.client.get_run(attempt.run_id)
        except (ServiceUnavailable, ApiError):
            return False
        budget = run.get("budget")
        old = attempt.cfg.get("budget", {}).get("max_device_hours")
        if budget is None or old is None or float(budget) <= float(old):
            return False
        if float(run.get("compute_used") or 0.0) < float(old):  # it ended on its step cap, not on its budget
            return False
        attempt.cfg = {**attempt.cfg, "budget": {**attempt.cfg["budget"], "max_device_hours": float(budget)}}
        prepare_run_dir(attempt.run_dir, attempt.cfg)
        return True

    def _launch(self, attempt: Attempt, resume: bool) -> subprocess.Popen[bytes]:
        request = attempt.run_dir / REQUEST_FILE
        RunDir(attempt.run_dir).status.unlink(missing_ok=True)  # only this execution's status counts
        request.write_text(yaml.safe_dump(attempt.cfg, sort_keys=False), encoding="utf-8")
        python = self.s.engine_python or sys.executable
        cmd = [python, "-m", "worker.engine_process", str(request), "--out", str(attempt.run_dir)]
        cmd += ["--grace", str(self.s.stop_grace_seconds)] + (["--resume"] if resume else [])
        logfile = (attempt.run_dir / ENGINE_LOG).open("ab")
        try:
            return subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            logfile.close()

    def _run_engine(self, attempt: Attempt, resume: bool) -> EngineExit:
        proc = self._launch(attempt, resume)
        log.info("run %s: engine pid %s started (%s)", attempt.run_id, proc.pid, "resume" if resume else "fresh")
        tail = MetricsTail(RunDir(attempt.run_dir).metrics)
        post = Backoff(self.s.max_backoff_seconds)
        term_at: float | None = None
        killed = False
        while True:
            now = time.monotonic()
            code = proc.poll()
            self._collect(attempt, tail)
            if attempt.stop != "lease_lost" and attempt.pending and now >= post.next_at:
                self._post(attempt, post, now)
            if attempt.stop is None and self.shutdown.is_set():
                attempt.stop = "shutdown"
            if code is not None:
                break
            if attempt.stop is not None and term_at is None:
                log.info("run %s: stopping the engine (%s)", attempt.run_id, attempt.stop)
                _signal(proc.pid, signal.SIGTERM, group=False)
                term_at = now
            if term_at is not None and now - term_at > self.s.stop_grace_seconds:
                log.warning("run %s: engine still alive after the grace period; SIGKILL", attempt.run_id)
                _signal(proc.pid, signal.SIGKILL, group=True)
                killed = True
            time.sleep(self.s.poll_seconds)
        _signal(proc.pid, signal.SIGKILL, group=True)  # the generator, if the leader left it behind
        self._drain(attempt, tail)
        return _engine_exit(attempt.run_dir, code, killed)

    def _collect(self, attempt: Attempt, tail: MetricsTail) -> None:
        for point in tail.read():
            if point.step == attempt.claimed_step and attempt.resume_compute is not None:
                self._shift_compute(attempt, point)
            if point.step > attempt.queued_step:
                if attempt.compute_shift:
                    point = dataclasses.replace(point, compute=point.compute + attempt.compute_shift)
                attempt.pending.append(point)  # sent as to_rest(point), the shape the engine's HttpReporter sends
                attempt.queued_step = point.step

    def _shift_compute(self, attempt: Attempt, point: MetricPoint) -> None:
        """A resumed engine recomputes the steps between its checkpoint and the service's last stored one; where it
        reaches that step with less compute than the lost attempt did (a step's CPU time varies with the machine's
        load), its next points fall below the stored compute and the service refuses them, lost for good (measured: a
        run resumed on another host from its checkpoint at step 20, the service at step 25, never stored step 26).
        Its points then continue from the stored compute: each later point gets the difference added."""
        shift = max(0.0, float(attempt.resume_compute or 0.0) - point.compute)
        if shift != attempt.compute_shift:
            log.info(
                "run %s: the resumed engine reached step %s at compute %.6g, the stored point has %.6g: its later "
                "points are sent %.6g higher",
                attempt.run_id,
                point.step,
                point.compute,
                attempt.resume_compute,
                shift,
            )
        attempt.compute_shift = shift

    def _post(self, attempt: Attempt, backoff: Backoff, now: float) -> None:
        batch = attempt.pending[: self.s.report_batch]
        try:
            answer: MetricsAnswer | None = self.client.post_points(attempt.run_id, batch, lease_id=attempt.lease_id)
        except ServiceUnavailable as exc:
            backoff.fail(now, exc.retry_after)
            log.warning(
                "run %s: metrics not delivered (%s); retry in %.1f s", attempt.run_id, exc, backoff.next_at - now
            )
            return
        except ApiError as exc:
            if lease_lost(exc):
                self._lost_lease(attempt, str(exc))
                return
            # No point of the batch was valid: keeping them would block the curve forever.
            answer = None
            log.error("run %s: the service refused %d points: %s", attempt.run_id, len(batch), exc)
        backoff.ok()
        # The service lists at most 50 rejected points; n_rejected counts them all.
        attempt.rejected += len(batch) if answer is None else answer.n_rejected
        if answer is not None and answer.n_rejected:
            log.warning(
                "run %s: the service refused %d points: %s", attempt.run_id, answer.n_rejected, answer.rejected[:3]
            )
        attempt.acked_step = batch[-1].step
        del attempt.pending[: len(batch)]
        if answer is not None and answer.action == "stop" and attempt.stop is None:
            attempt.stop = "server"

    def _heartbeat(self, attempt: Attempt, backoff: Backoff, now: float) -> None:
        """One lease renewal (called by :class:`Heartbeat`)."""
        try:
            answer = self.client.renew_lease(attempt.run_id, attempt.lease_id, self.s.lease_seconds)
        except ServiceUnavailable as exc:
            backoff.fail(now, exc.retry_after)
            log.warning("run %s: heartbeat failed (%s)", attempt.run_id, exc)
            return
        except ApiError as exc:  # 409 or another refusal: either way the lease cannot be renewed
            self._lost_lease(attempt, str(exc))
            return
        backoff.ok()
        if answer.action == "stop" and attempt.stop is None:
            attempt.stop = "server"

    def _lost_lease(self, attempt: Attempt, detail: str) -> None:
        if attempt.stop != "lease_lost":
            log.error("run %s: lease lost (%s); stopping the engine and writing nothing more", attempt.run_id, detail)
        attempt.stop = "lease_lost"

    def _drain(self, attempt: Attempt, tail: MetricsTail) -> None:
        """Deliver every remaining point (the engine exited) while the lease holds, for up to ``drain_seconds``, a
        worker shutting down too (its release waits for them; see :meth:`_finish`)."""
        self._collect(attempt, tail)
        deadline = time.monotonic() + self.s.drain_seconds
        backoff = Backoff(self.s.max_backoff_seconds)
        while attempt.pending and attempt.stop != "lease_lost" and time.monotonic() < deadline:
            now = time.monotonic()
            if now >= backoff.next_at:
                self._post(attempt, backoff, now)
            if attempt.pending:
                time.sleep(min(self.s.poll_seconds, max(0.0, backoff.next_at - time.monotonic())) or 0.01)
        if attempt.pending and attempt.stop != "lease_lost":
            log.error(
                "run %s: %d points undelivered after %.0f s", attempt.run_id, len(attempt.pending), self.s.drain_seconds
            )

    def _conclude(self, attempt: Attempt, result: EngineExit) -> str:
        step = result.step if result.step is not None else attempt.queued_step
        if attempt.stop == "lease_lost":
            return f"run {attempt.run_id}: lease lost; nothing reported"
        if attempt.pending:
            return f"run {attempt.run_id}: points undelivered; the lease will expire and the run be retried"
        if attempt.stop == "shutdown":
            reason = f"worker {self.name} shut down at step {step}; the run resumes from its last checkpoint"
            self._finish(attempt, "lost", reason, release=True)
            return f"run {attempt.run_id} released"
        if result.status in ("succeeded", "stopped", "failed"):
            status, reason = result.status, result.reason
        elif attempt.stop == "server":
            status, reason = "stopped", f"stopped on request at step {step} (engine killed after the grace period)"
        else:
            status, reason = "failed", result.reason
        if attempt.stop == "server" and status == "succeeded":
            reason = f"{reason} (a stop was requested as it finished)"
        self._finish(attempt, status, reason)
        return f"run {attempt.run_id} {status}: {reason}"

    def _finish(self, attempt: Attempt, status: str, reason: str, *, release: bool = False) -> None:
        """Report the final status, retrying for ``drain_seconds``; a worker shutting down too: its release (``lost``)
        lets the run resume at once, where an unreported run waits for its lease to expire. A worker that gave up after
        15 s lost the release whenever the API answered 503 that long (PostgreSQL stopped by the same `docker compose
        down`); the container's stop_grace_period bounds the wait instead."""
        deadline = time.monotonic() + self.s.drain_seconds
        attempt.reporting = True
        try:
            retry(
                lambda: self.client.report_status(
                    attempt.run_id, status, reason, lease_id=attempt.lease_id, release=release
                ),
                deadline,
                self.s.max_backoff_seconds,
            )
        except ServiceUnavailable as exc:
            log.error("run %s: could not report %s (%s); its lease will expire", attempt.run_id, status, exc)
        except ApiError as exc:
            log.error("run %s: the service refused status %s: %s", attempt.run_id, status, exc)
        else:
            log.info("run %s: %s (%s)", attempt.run_id, status, reason)


def _signal(pid: int, sig: signal.Signals, *, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _engine_exit(run_dir: Path, code: int, killed: bool) -> EngineExit:
    """What the engine said (``status.json`` written at the end of this execution) or what its log shows."""
    import json

    status_path = RunDir(run_dir).status
    log_tail = _log_tail(run_dir / ENGINE_LOG)
    if code in (0, 1) and status_path.is_file():
        try:
            doc = json.loads(status_path.read_text(encoding="utf-8"))
            return EngineExit(code, str(doc["status"]), str(doc["reason"]), int(doc["step"]), killed)
        except (ValueError, KeyError, TypeError):
            pass
    if code < 0:
        reason = f"engine killed by signal {signal.Signals(-code).name}" + (f": {log_tail}" if log_tail else "")
    elif code == 2:
        reason = f"engine refused its config: {log_tail}"
    else:
        reason = f"engine exited with code {code}: {log_tail}"
    return EngineExit(code, None, reason, None, killed)


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-1500:]
