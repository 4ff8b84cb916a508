"""Offline, then sync. A Reporter writes every point to its folder before log() returns and keeps what it could not
deliver (points and the final status) there, as `wandb offline` does; `scalerl sync DIR` sends it later, exactly
once."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import Client, Reporter
from scalerl.client.runlog import segment_files
from tests.client.conftest import Service


def _lines(folder: Path) -> list[str]:
    return [line for f in segment_files(folder) for line in f.read_text().splitlines()]


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _sync(service: Service, folder: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sync", str(folder), "--url", service.url, "--token", service.token])
    return result.exit_code, result.output


def test_unreachable_service_keeps_points_and_sync_sends_them_once(service: Service, tmp_path: Path) -> None:
    tmp_path = tmp_path / "offline"  # the service's database lives in the test's own tmp_path
    rep = Reporter.start("on-a-plane", url=_dead_url(), token="x", experiment="offline-exp", offline_dir=tmp_path,
                         backoff=0.05, max_backoff=0.1, handle_signals=False)  # fmt: skip
    for step in range(1, 31):
        rep.log(step, float(step), 0.01 * step, loss=1.0 / step)
    assert rep.finish(timeout=1.0) is False  # not delivered: kept on disk instead
    folders = list(tmp_path.iterdir())
    assert len(folders) == 1 and (folders[0] / "end.json").exists()
    assert len(_lines(folders[0])) == 30
    assert json.loads((folders[0] / "end.json").read_text())["status"] == "succeeded"

    code, out = _sync(service, tmp_path)
    assert code == 0 and "run on-a-plane" in out and "30 points (30 stored, 0 already there), status succeeded" in out
    with Client(service.url, service.token) as api:
        run = api.find_run_by_name("on-a-plane", "offline-exp")
        assert run is not None and run.status == "succeeded" and run.n_points == 30
    code, out = _sync(service, tmp_path)  # exactly once
    assert code == 0 and "already synced" in out, out
    with Client(service.url, service.token) as api:
        again = api.find_run_by_name("on-a-plane", "offline-exp")
        assert again is not None and again.n_points == 30 and again.id == run.id


def test_offline_mode_never_connects_then_syncs(service: Service, tmp_path: Path) -> None:
    tmp_path = tmp_path / "offline"
    rep = Reporter.start("offline-run", url=_dead_url(), experiment="offline-exp", mode="offline",
                         offline_dir=tmp_path, handle_signals=False)  # fmt: skip
    for step in range(1, 11):
        assert rep.log(step, 10.0 * step, 0.05 * step) == "continue"
    assert rep.finish("stopped", "budget spent") and rep.connected is None  # never tried the network
    folder = next(tmp_path.iterdir())
    with segment_files(folder)[-1].open("a") as f:
        f.write('{"step": 11, "comp')  # a process killed mid-write: skipped, not fatal
    code, out = _sync(service, folder)
    assert code == 0 and "10 points (10 stored, 0 already there), status stopped, 1 unreadable lines skipped" in out


def test_sync_refusals_and_missing_directory(service: Service, tmp_path: Path) -> None:
    code, out = _sync(service, tmp_path / "nope")
    assert code == 2 and "no such directory" in out and "Traceback" not in out
    (tmp_path / "empty").mkdir()
    code, out = _sync(service, tmp_path / "empty")
    assert code == 0 and "nothing to sync" in out


def test_points_are_on_disk_as_they_are_logged_and_forgotten_once_delivered(tmp_path: Path) -> None:
    """A process killed outright (SIGKILL, OOM) during an outage keeps every point it logged; once the service is back
    and stored everything, the run finishes and the folder is removed."""
    from tests.client.conftest import build_context, write_token
    from tests.server.live import live_server

    ctx = build_context(tmp_path)
    token = write_token(ctx)
    port = int(_dead_url().rsplit(":", 1)[1])
    spool = tmp_path / "offline"
    rep = Reporter.start("outage", url=f"http://127.0.0.1:{port}", token=token, offline_dir=spool, timeout=2.0,
                         flush_interval=0.05, backoff=0.05, max_backoff=0.1, handle_signals=False)  # fmt: skip
    for step in range(1, 26):
        rep.log(step, float(step), 0.02 * step)
        assert len(_lines(rep.runlog.path)) == step  # on disk when log() returns: a kill -9 now loses nothing
    folder = rep.runlog.path
    with live_server(ctx, port) as url:
        assert rep.flush(timeout=20)
        assert rep.runlog.waiting == 0
        assert rep.finish()
        assert not folder.exists()  # delivered: nothing left to sync
        with Client(url, token) as api:
            run = api.find_run_by_name("outage")
            assert run is not None and run.n_points == 25 and run.status == "succeeded"
    ctx.engine.dispose()


def test_a_killed_process_folder_syncs_and_its_run_ends_lost(service: Service, tmp_path: Path) -> None:
    spool = tmp_path / "offline"
    rep = Reporter.start("killed", url=_dead_url(), experiment="offline-exp", offline_dir=spool, backoff=0.05,
                         max_backoff=0.1, handle_signals=False)  # fmt: skip
    for step in range(1, 11):
        rep.log(step, float(step), 0.05 * step)
    folder = rep.runlog.path
    code, out = _sync(service, spool)  # its writer is alive: left alone
    assert code == 0 and "still writing" in out, out
    rep.close(timeout=0.1)  # as if killed: no finish, no final status; the folder's lock is released
    assert not (folder / "end.json").exists()
    code, out = _sync(service, spool)
    assert code == 0 and "10 points (10 stored, 0 already there), status lost" in out, out
    with Client(service.url, service.token) as api:
        run = api.find_run_by_name("killed", "offline-exp")
        assert run is not None and run.status == "lost" and run.n_points == 10


def test_a_step_logged_again_is_read_merged(tmp_path: Path) -> None:
    """The folder holds each line as logged; a point merged with more after it was written (an evaluation logged
    later for its step) is written again, and sync reads the merged one."""
    from scalerl.client.offline import _read_points

    down = httpx.MockTransport(lambda r: httpx.Response(503, json={"detail": "down"}))
    client = Client("http://svc", "t", transport=down)
    rep = Reporter(client, run_id=1, flush_interval=0.01, poll_interval=60.0, backoff=0.01, max_backoff=0.02,
                   offline_dir=tmp_path, handle_signals=False)  # fmt: skip
    for step in range(5):
        rep.log(step, float(step), loss=1.0)
    rep.log(3, 3.0, 0.4)  # its evaluation, after the point was written
    assert rep.finish(timeout=0.3) is False
    lines = [json.loads(line) for line in _lines(rep.runlog.path)]
    assert sorted(p["step"] for p in lines) == [0, 1, 2, 3, 3, 4]
    points, skipped = _read_points(rep.runlog.path)
    assert [p.step for p in points] == [0, 1, 2, 3, 4] and skipped == 0
    assert points[3].pass_rate == 0.4 and points[3].metrics == {"loss": 1.0}
    client.close()
