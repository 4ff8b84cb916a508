"""Issue 45: offline, then sync. A Reporter that cannot reach the service keeps what it could not deliver (points and
the final status) on disk, as `wandb offline` does, and `scalerl sync DIR` sends it later, exactly once."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import Client, Reporter
from tests.client.conftest import Service, wait_for


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
    assert len((folders[0] / "points.jsonl").read_text().splitlines()) == 30
    assert json.loads((folders[0] / "end.json").read_text())["status"] == "succeeded"

    code, out = _sync(service, tmp_path)
    assert code == 0 and "run on-a-plane" in out and "30 points, status succeeded" in out, out
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
    with (folder / "points.jsonl").open("a") as f:
        f.write('{"step": 11, "comp')  # a process killed mid-write: skipped, not fatal
    code, out = _sync(service, folder)
    assert code == 0 and "10 points, status stopped, 1 unreadable lines skipped" in out, out


def test_sync_refusals_and_missing_directory(service: Service, tmp_path: Path) -> None:
    code, out = _sync(service, tmp_path / "nope")
    assert code == 2 and "no such directory" in out and "Traceback" not in out
    (tmp_path / "empty").mkdir()
    code, out = _sync(service, tmp_path / "empty")
    assert code == 0 and "nothing to sync" in out


def test_an_outage_is_written_to_disk_as_it_goes_and_forgotten_once_delivered(tmp_path: Path) -> None:
    """A process killed outright (SIGKILL, OOM) during an outage keeps what it logged up to its last retry; once the
    service is back and stored everything, the folder is removed."""
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
    deadline = time.monotonic() + 20
    written: list[str] = []
    while time.monotonic() < deadline and len(written) < 25:
        files = list(spool.glob("*/points.jsonl"))
        written = files[0].read_text().splitlines() if files else []
        time.sleep(0.05)
    assert len(written) == 25  # on disk while the process lives: a kill -9 now loses nothing
    folder = next(spool.iterdir())
    with live_server(ctx, port) as url:
        assert rep.flush(timeout=20)
        assert not folder.exists()  # delivered: nothing left to sync
        assert rep.finish()
        with Client(url, token) as api:
            run = api.find_run_by_name("outage")
            assert run is not None and run.n_points == 25 and run.status == "succeeded"
    ctx.engine.dispose()


def test_a_killed_process_folder_syncs_without_a_status(service: Service, tmp_path: Path) -> None:
    spool = tmp_path / "offline"
    rep = Reporter.start("killed", url=_dead_url(), experiment="offline-exp", offline_dir=spool, backoff=0.05,
                         max_backoff=0.1, handle_signals=False)  # fmt: skip
    for step in range(1, 11):
        rep.log(step, float(step), 0.05 * step)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not list(spool.glob("*/points.jsonl")):
        time.sleep(0.05)
    rep.close(timeout=0.1)  # as if killed: no finish, no final status
    folder = next(spool.iterdir())
    assert not (folder / "end.json").exists()
    code, out = _sync(service, spool)
    assert code == 0 and "10 points, status unchanged" in out, out


def test_a_point_written_during_an_outage_is_not_written_again_at_finish(tmp_path: Path) -> None:
    """The outage's spool and finish()'s leftovers hold each point once; a point merged with more after it was
    written (an evaluation logged later for its step) is written again, and sync reads the merged one."""
    down = httpx.MockTransport(lambda r: httpx.Response(503, json={"detail": "down"}))
    client = Client("http://svc", "t", transport=down)
    rep = Reporter(client, run_id=1, flush_interval=0.01, poll_interval=60.0, backoff=0.01, max_backoff=0.02,
                   offline_dir=tmp_path, handle_signals=False)  # fmt: skip
    for step in range(5):
        rep.log(step, float(step), loss=1.0)
    assert wait_for(lambda: rep._backoff.failures >= 2 and len(rep._spilled) == 5)  # the outage: on disk
    rep.log(3, 3.0, 0.4)  # its evaluation, after the point was written
    assert rep.finish(timeout=0.3) is False
    lines = [json.loads(line) for line in (rep.spool.path / "points.jsonl").read_text().splitlines()]
    assert sorted(p["step"] for p in lines) == [0, 1, 2, 3, 3, 4]
    assert [p["pass_rate"] for p in lines if p["step"] == 3][-1] == 0.4
    client.close()
