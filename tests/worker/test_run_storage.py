"""The run storage (worker/storage.py, worker/run_sync.py) against real backends: a local folder (what an NFS mount
is to the worker) and a real SFTP server (Debian's OpenSSH sshd, tests/worker/sftp_server.py, through fsspec's
``sshfs``): upload and fetch, an interrupted upload (raised mid-way, and an uploader killed with SIGKILL) never taken
for a checkpoint, a corrupted file skipped, pruning; and a run resumed on "another host" (a second worker with an
empty runs dir and no shared folder) from the last checkpoint in SFTP storage, every step stored once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rl_core.contracts.points import MetricPoint, read_points
from rl_core.contracts.run_dir import latest_checkpoint
from tests.services import unavailable
from tests.support.processes import engine_pids
from tests.worker.cluster import REPO, grid, make_cluster, wait_for
from tests.worker.conftest import _token, logs_of
from tests.worker.sftp_server import SftpServer, sshd_missing
from worker.run_sync import RunSync
from worker.settings import WorkerSettings
from worker.storage import RunStorage, StorageError


@pytest.fixture(scope="module")
def sftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SftpServer]:
    if (why := sshd_missing()) is not None:
        unavailable(why)
    with SftpServer(tmp_path_factory.mktemp("sftp")) as server:
        yield server


class Backend:
    """A storage URL, its options, and the local folder its files are in (to look at or damage them)."""

    def __init__(self, url: str, options: dict[str, Any], folder: Path) -> None:
        self.url, self.options, self.folder = url, options, folder

    def storage(self) -> RunStorage:
        return RunStorage(self.url, self.options)


@pytest.fixture(params=["local", pytest.param("sftp", marks=pytest.mark.process)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return Backend(str(tmp_path / "store"), {}, tmp_path / "store")
    server: SftpServer = request.getfixturevalue("sftp")
    folder = server.root / tmp_path.name
    return Backend(f"{server.url}/{tmp_path.name}", server.options, folder)


def fake_checkpoint(run_dir: Path, step: int, *, size: int = 200_000, config: str = "name: run-1\n") -> Path:
    """A checkpoint as the engine leaves it (``rl_core.engine.checkpoint``): step folder, nested backend files,
    ``engine.json``, the ``latest`` pointer; and the run's ``config.yaml``."""
    ckpt = run_dir / "checkpoints" / f"step_{step:06d}"
    (ckpt / "deepspeed" / "global_step").mkdir(parents=True)
    (ckpt / "trainer.pt").write_bytes(os.urandom(size))
    (ckpt / "deepspeed" / "global_step" / "shard.bin").write_bytes(os.urandom(1000))
    (ckpt / "engine.json").write_text(json.dumps({"step": step}))
    (run_dir / "checkpoints" / "latest").write_text(ckpt.name)
    (run_dir / "config.yaml").write_text(config)
    return ckpt


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_checkpoint_round_trip_to_another_host(backend: Backend, tmp_path: Path) -> None:
    here, there = tmp_path / "host-a" / "run-1", tmp_path / "host-b" / "run-1"
    ckpt = fake_checkpoint(here, 2)
    sync = RunSync(backend.storage(), 1, here, attempt=1)
    assert sync.restore() == "no checkpoint in run storage; the local one at step 2"
    assert sync.sync_once() and not sync.sync_once()  # uploaded once
    fake_checkpoint(here, 4, config="name: run-1\nbudget: 2\n")
    # The engine writes a step's point before its checkpoint: the file may hold later steps and a line being written.
    points = [json.dumps(MetricPoint(step=i, compute=0.1 * i, pass_rate=None).to_json()) for i in range(7)]
    (here / "metrics.jsonl").write_text("\n".join(points) + "\n" + points[0][:10])
    assert sync.sync_once() and sync.uploaded_step == 4

    other = RunSync(backend.storage(), 1, there, attempt=2)
    assert other.restore().startswith("fetched checkpoint step 4 from run storage")
    got = latest_checkpoint(there / "checkpoints")
    assert got is not None and got.name == "step_000004"
    assert files_of(got) == files_of(here / "checkpoints" / "step_000004") != files_of(ckpt)
    assert (there / "config.yaml").read_text() == "name: run-1\nbudget: 2\n"
    # The points up to the checkpoint come along: those the service had not stored yet are sent by the next host.
    assert [p.step for p in read_points(there / "metrics.jsonl")] == [0, 1, 2, 3, 4]
    assert not list((there / "checkpoints").glob(".fetch-*"))
    # The same host again: its own checkpoint is as new as storage's, nothing is downloaded.
    assert RunSync(backend.storage(), 1, there, attempt=3).restore().startswith("the local checkpoint at step 4")


def test_an_interrupted_upload_or_a_damaged_file_is_never_taken_for_a_checkpoint(
    backend: Backend, tmp_path: Path
) -> None:
    storage = backend.storage()
    here = tmp_path / "host-a" / "run-1"
    fake_checkpoint(here, 2)
    storage.upload_checkpoint(1, 2, here / "checkpoints" / "step_000002")
    fake_checkpoint(here, 4)
    with pytest.raises(StorageError, match="interrupted after 2 files"):
        storage.upload_checkpoint(1, 4, here / "checkpoints" / "step_000004", fail_after=2)
    base = backend.folder / "run-1" / "checkpoints"
    half = [p for p in base.iterdir() if p.name.startswith("step_000004.")]
    assert len(half) == 1 and half[0].is_dir() and len(files_of(half[0])) == 2  # files, no manifest
    # A manifest written but never renamed into place (the uploader died between the two) is no checkpoint either.
    fake_checkpoint(here, 6)
    good = storage.upload_checkpoint(1, 6, here / "checkpoints" / "step_000006")
    (base / f"{good.name}.json").rename(base / f"{good.name}.json.part")
    assert [m.step for m in storage.manifests(1)] == [2]
    assert RunSync(storage, 1, tmp_path / "b" / "run-1", attempt=2).restore().startswith("fetched checkpoint step 2")

    # A complete upload whose file was then damaged (same size, other bytes) fails the sha256 check: the next older
    # checkpoint is fetched instead.
    (base / f"{good.name}.json.part").rename(base / f"{good.name}.json")
    target = base / good.name / "trainer.pt"
    target.write_bytes(bytes(len(target.read_bytes())))
    there = tmp_path / "c" / "run-1"
    assert RunSync(storage, 1, there, attempt=2).restore().startswith("fetched checkpoint step 2")
    assert json.loads((there / "checkpoints" / "step_000002" / "engine.json").read_text()) == {"step": 2}
    # A missing file too; and when no checkpoint at all can be fetched, an error, never a fresh start.
    (base / good.name / "engine.json").unlink()
    for m in storage.manifests(1):
        if m.step == 2:
            (base / m.name / "rng-or-any-file").write_text("")  # extra files are ignored...
            (base / m.name / "trainer.pt").unlink()  # ...a missing one is not
    with pytest.raises(StorageError, match="no checkpoint of run 1 could be fetched"):
        RunSync(storage, 1, tmp_path / "d" / "run-1", attempt=3).restore()


def test_prune_keeps_the_newest_and_drops_interrupted_uploads(backend: Backend, tmp_path: Path) -> None:
    storage = backend.storage()
    run_dir = tmp_path / "run-1"
    for step in (2, 4, 6, 8):
        fake_checkpoint(run_dir, step)
        storage.upload_checkpoint(1, step, run_dir / "checkpoints" / f"step_{step:06d}")
    fake_checkpoint(run_dir, 3)
    with pytest.raises(StorageError):
        storage.upload_checkpoint(1, 3, run_dir / "checkpoints" / "step_000003", fail_after=1)
    fake_checkpoint(run_dir, 10)
    with pytest.raises(StorageError):  # newer than every kept one: may be another uploader's, under way
        storage.upload_checkpoint(1, 10, run_dir / "checkpoints" / "step_000010", fail_after=1)
    assert storage.prune(1, keep=2) == 3  # steps 2 and 4, and the interrupted step 3
    names = sorted(p.name.split(".")[0] + ("+json" if p.suffix == ".json" else "") for p in storage_dir(backend))
    assert names == ["step_000006", "step_000006+json", "step_000008", "step_000008+json", "step_000010"]
    assert [m.step for m in storage.manifests(1)] == [8, 6]


def storage_dir(backend: Backend) -> list[Path]:
    return list((backend.folder / "run-1" / "checkpoints").iterdir())


UPLOADER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from worker.storage import RunStorage
    url, options, folder = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
    RunStorage(url, options).upload_checkpoint(1, 4, folder)
    print("finished", flush=True)
    """
)


def test_an_uploader_killed_mid_upload_leaves_the_previous_checkpoint(backend: Backend, tmp_path: Path) -> None:
    storage = backend.storage()
    run_dir = tmp_path / "run-1"
    fake_checkpoint(run_dir, 2)
    storage.upload_checkpoint(1, 2, run_dir / "checkpoints" / "step_000002")
    big = fake_checkpoint(run_dir, 4, size=1000)
    for n in range(12):
        (big / f"shard-{n:02d}.bin").write_bytes(os.urandom(16_000_000))
    proc = subprocess.Popen(
        [sys.executable, "-c", UPLOADER, backend.url, json.dumps(backend.options), str(big)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = backend.folder / "run-1" / "checkpoints"

    def uploading() -> bool:
        return any(p.name.startswith("step_000004.") and any(p.glob("shard-*")) for p in base.iterdir())

    try:
        wait_for(uploading, 60, "the upload to begin", interval=0.01)
    finally:
        proc.kill()
        out = proc.communicate(timeout=30)[0].decode()
    assert "finished" not in out, "the upload ended before the kill: make the checkpoint larger"
    assert not [p for p in base.iterdir() if p.name.startswith("step_000004.") and p.name.endswith(".json")]
    assert [m.step for m in storage.manifests(1)] == [2]
    there = tmp_path / "host-b" / "run-1"
    assert RunSync(storage, 1, there, attempt=2).restore().startswith("fetched checkpoint step 2")


@pytest.mark.process
def test_an_sftp_outage_is_an_error_and_the_next_call_reconnects(tmp_path: Path) -> None:
    """The worker keeps one storage object per attempt: a restarted SFTP server must not leave it broken."""
    if (why := sshd_missing()) is not None:
        unavailable(why)
    server = SftpServer(tmp_path / "sftp")
    server.start()
    storage = RunStorage(server.url, {**server.options, "timeout": 5})
    run_dir = tmp_path / "run-1"
    try:
        fake_checkpoint(run_dir, 2)
        sync = RunSync(storage, 1, run_dir, attempt=1)
        assert sync.sync_once()
        server.stop()
        fake_checkpoint(run_dir, 4)
        assert not sync.sync_once() and sync.last_error and "upload of checkpoint step 4" in sync.last_error
        with pytest.raises(StorageError):
            RunSync(storage, 1, tmp_path / "b" / "run-1", attempt=2).restore_retrying(1.0, 0.5)
        server.start()  # same port, same keys
        assert sync.sync_once() and sync.uploaded_step == 4 and sync.last_error is None
    finally:
        server.stop()


def test_run_storage_settings(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="nosuch"):
        WorkerSettings(home=tmp_path, run_storage="nosuch://bucket/runs")
    s = WorkerSettings(
        home=tmp_path,
        run_storage="sftp://scalerl@storage:22/srv/runs",
        run_storage_options={"client_keys": ["/run/secrets/key"], "known_hosts": "/etc/scalerl/known_hosts"},
    )
    assert s.run_storage_keep == 2 and s.run_storage_options["known_hosts"] == "/etc/scalerl/known_hosts"
    assert WorkerSettings(home=tmp_path).run_storage == ""
    WorkerSettings(home=tmp_path, run_storage=str(tmp_path / "nfs"))  # a path: local or a mount


# ---- a run that moves between hosts --------------------------------------------------------------------------------

STEPS = 200  # the engine trains on while the service is paused: the kill must still land mid-run


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.postgres
@pytest.mark.redis
def test_a_run_killed_on_one_host_resumes_on_another_from_run_storage(
    pg: str, redis_server: Any, sftp: SftpServer, tmp_path: Path
) -> None:
    """Two workers ("hosts") with runs dirs of their own, nothing shared but the service and the SFTP storage:
    host A is killed (worker and engine, SIGKILL: a machine lost) after a checkpoint was uploaded; host B, with an
    empty runs dir, fetches it and continues the run; every step is stored once."""
    home = tmp_path / "home"
    storage_url = f"{sftp.url}/{tmp_path.name}"
    cluster = make_cluster(
        home,
        pg,
        redis_server.url,
        _token(pg),
        STEPS,
        SCALERL_RUN_STORAGE=storage_url,
        SCALERL_RUN_STORAGE_OPTIONS=json.dumps(sftp.options),
        SCALERL_LEASE_SECONDS="6",
    )
    hosts = {name: home / name / "runs" for name in ("host-a", "host-b")}
    storage = RunStorage(storage_url, sftp.options)
    try:
        cluster.start_server()
        cluster.start_worker("cpu")
        cluster.spawn("host-a", "worker", "--queues", "gpu", extra={"SCALERL_RUNS_DIR": str(hosts["host-a"])})
        run_id = cluster.submit(grid("two-hosts"))
        wait_for(lambda: (storage.newest_step(run_id) or 0) >= 2, 120, "a checkpoint in run storage", 0.2)
        cluster.wait_steps(run_id, 4, 60)
        # The service stops answering for a moment (SIGSTOP): host A's points wait in the worker while its engine
        # trains on and its checkpoints reach storage, so storage holds a checkpoint past the service's last step.
        server = cluster.procs["server"]
        os.kill(server.pid, signal.SIGSTOP)
        try:
            # The worker's next POST goes out within a poll (0.2 s) and waits for an answer (30 s): the kernel still
            # accepts it and the server reads it after SIGCONT, so the service will have every point written by
            # then, and none written later (the engine writes a point before the worker can send it).
            time.sleep(1.0)
            written = read_points(hosts["host-a"] / f"run-{run_id}" / "metrics.jsonl")[-1].step
            wait_for(lambda: (storage.newest_step(run_id) or 0) >= written + 2, 30, "a newer checkpoint", 0.1)
            pids = engine_pids(hosts["host-a"], run_id)
            assert pids, "the engine finished before the kill; raise STEPS"
            cluster.kill("host-a", signal.SIGKILL)
            for pid in pids:  # the whole machine is lost: its engine too, before it can checkpoint at SIGTERM
                os.killpg(pid, signal.SIGKILL)
        finally:
            os.kill(server.pid, signal.SIGCONT)
        time.sleep(2)  # a request host A sent just before it died is still answered
        stored_at_kill = storage.newest_step(run_id)
        served_at_kill = cluster.run(run_id)["last_step"]
        assert stored_at_kill is not None and served_at_kill < stored_at_kill, (served_at_kill, stored_at_kill)
        cluster.wait_status(run_id, {"lost", "queued"}, 45)
        assert not hosts["host-b"].exists()
        cluster.spawn("host-b", "worker", "--queues", "gpu", extra={"SCALERL_RUNS_DIR": str(hosts["host-b"])})
        run = cluster.wait_status(run_id, {"succeeded", "failed"}, 180)
        assert run["status"] == "succeeded", (run["status_reason"], logs_of(cluster))
        assert run["attempts"] == 2
        assert cluster.steps(run_id) == list(range(STEPS + 1))  # every step stored once
        b_log = (cluster.logs / "host-b.log").read_text()
        assert f"attempt 2, resuming after step {served_at_kill}" in b_log, b_log[-3000:]
        assert f"run {run_id}: fetched checkpoint step {stored_at_kill} from run storage" in b_log, b_log[-3000:]
        assert f"run {run_id}: engine pid" in b_log and "started (resume)" in b_log, b_log[-3000:]
        # Host B uploaded its own checkpoints up to the last one (a poll uploads the newest: checkpoints written
        # meanwhile are skipped) and its engine log; storage keeps the newest 2.
        steps = [m.step for m in storage.manifests(run_id)]
        assert len(steps) == 2 and steps[0] == STEPS and stored_at_kill < STEPS, (steps, stored_at_kill)
        assert storage.read_file(run_id, "logs/attempt-2.engine.log")
    finally:
        cluster.stop_all()
        storage.close()


@pytest.mark.parametrize(("stored", "sent"), [(0.5, [(4, 0.6), (5, 0.7)]), (0.2, [(4, 0.4), (5, 0.5)])])
def test_a_resumed_attempt_continues_the_stored_compute(
    tmp_path: Path, stored: float, sent: list[tuple[int, float]]
) -> None:
    """The resumed engine recomputed steps 2-3 after its checkpoint at step 1 and reached step 3 at compute 0.3; the
    lost attempt had stored step 3 at ``stored``. Where that is higher, the later points are sent that much higher
    (else the service would refuse step 4 for compute below step 3's); where lower, as they are."""
    import threading

    from rl_core.contracts.points import MetricsTail
    from worker.executor import Attempt, RunExecutor

    executor = RunExecutor(WorkerSettings(home=tmp_path), None, threading.Event())  # type: ignore[arg-type]
    run = {"id": 7, "name": "run-7", "last_step": 3, "compute_used": stored, "attempts": 2}
    attempt = Attempt(run=run, lease_id="lease", run_dir=tmp_path, acked_step=3, queued_step=3, resume_compute=stored)
    points = [json.dumps(MetricPoint(step=i, compute=0.1 * i).to_json()) for i in range(6)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(points) + "\n")
    executor._collect(attempt, MetricsTail(tmp_path / "metrics.jsonl"))
    assert [(p.step, round(p.compute, 9)) for p in attempt.pending] == sent
