"""From the command line: `scalerl experiment create`, `scalerl stop RUN`, `scalerl finish
RUN`, `watch --experiment NAME`, and `watch` on a directory that does not exist yet (it crashed with an
IsADirectoryError traceback: the format was guessed as a verl log before the directory appeared)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import Client, Point
from tests.client.conftest import Service


def invoke(service: Service, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--url", service.url, "--token", service.token])
    return result.exit_code, result.output


def test_experiment_create_stop_and_finish_by_name(service: Service) -> None:
    code, out = invoke(service, "experiment", "create", "sweep", "--unit", "tokens", "--budget", "1e6",
                       "--task", "gsm8k", "--model", "qwen 0.5b")  # fmt: skip
    assert code == 0 and "experiment sweep (id" in out and "compute in tokens, 0 runs" in out, out
    code, out = invoke(service, "experiment", "create", "sweep")
    assert code == 2 and out.startswith("error:") and "already exists" in out and "Traceback" not in out
    code, out = invoke(service, "experiment", "create", "sweep", "--unit", "tokens", "--exist-ok")
    assert code == 0, out
    code, out = invoke(service, "experiment", "create", "bad", "--budget", "-3")
    assert code == 2 and "--budget must be a finite number > 0" in out

    with Client(service.url, service.token) as api:
        run = api.register_run("lr-1e-6", experiment="sweep", compute_unit="tokens")
        api.post_points(run.id, [Point.make(1, 100.0, 0.1)])  # running now
    code, out = invoke(service, "stop", "lr-1e-6", "--experiment", "sweep")
    assert code == 0 and f"run lr-1e-6 (id {run.id}): stopping" in out, out
    code, out = invoke(service, "finish", str(run.id), "--status", "stopped")
    assert code == 0 and "stopped" in out, out
    code, out = invoke(service, "stop", "nope", "--experiment", "sweep")
    assert code == 2 and "no run named 'nope' in experiment 'sweep'" in out and "Traceback" not in out
    code, out = invoke(service, "stop", "x", "--experiment", "no-such-experiment")
    assert code == 2 and "no experiment named 'no-such-experiment'" in out
    code, out = invoke(service, "stop", "999999")
    assert code == 2 and "404" in out and "Traceback" not in out


def test_watch_waits_for_a_directory_and_joins_an_experiment_by_name(service: Service, tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    tb = tmp_path / "tb"  # does not exist yet: the job creates it when it starts

    def job() -> None:
        time.sleep(0.8)
        w = SummaryWriter(str(tb))
        for step in range(1, 7):
            w.add_scalar("eval/accuracy", 0.1 * step, step)
            w.add_scalar("train/loss", 1.0 / step, step)
        w.close()

    writer = threading.Thread(target=job, daemon=True)
    writer.start()
    code, out = invoke(service, "watch", str(tb), "--run", "tb-run", "--experiment", "watched", "--interval", "0.2",
                       "--settle", "0.3", "--idle-exit", "3")  # fmt: skip
    writer.join(timeout=10)
    assert code == 0, out
    assert f"waiting for {tb} to appear" in out and "Traceback" not in out
    with Client(service.url, service.token) as api:
        exp = api.find_experiment("watched")
        assert exp is not None and exp["document"]["compute_unit"] == "step"
        run = api.find_run("tb-run", int(exp["id"]))
        assert run is not None and run.status == "succeeded" and run.n_points == 6


def test_watch_into_an_experiment_of_another_unit_is_one_error_line(service: Service, tmp_path: Path) -> None:
    with Client(service.url, service.token) as api:
        api.ensure_experiment("tokens-only", compute_unit="tokens")
    log = tmp_path / "m.jsonl"
    log.write_text("".join(f'{{"step": {s}, "gpu_hours": {0.1 * s}, "pass_rate": {0.1 * s}}}\n' for s in range(1, 6)))
    code, out = invoke(service, "watch", str(log), "--run", "r", "--experiment", "tokens-only", "--interval", "0.2",
                       "--settle", "0.2", "--idle-exit", "20")  # fmt: skip
    assert code == 2, out
    assert "error: the service refused run r" in out and "'tokens'" in out and "Traceback" not in out


def test_watch_refuses_a_store_uri_instead_of_waiting_for_it(service: Service) -> None:
    code, out = invoke(service, "watch", "sqlite:///nowhere/mlflow.db", "--run", "r", "--idle-exit", "1")
    assert code == 2 and "import an MLflow store with `scalerl import`" in out, out
