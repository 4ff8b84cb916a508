"""`scalerl import` and `scalerl watch` against a live service: past runs become runs of an experiment with their
forecasts (re-importing changes nothing), CSVs that `scalerl fit` reads, and a growing verl log followed live
until the service says stop."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import Client
from tests.client.conftest import Service
from tests.integrations.test_readers import verl_console_log


def test_import_verl_logs_into_an_experiment_and_as_csv(service: Service, tmp_path: Path) -> None:
    a, b = tmp_path / "ppo-a.log", tmp_path / "ppo-b.log"
    a.write_text(verl_console_log())
    b.write_text(verl_console_log(8))
    args = ["import", str(a), str(b), "--gpus", "8", "--experiment", "verl-past", "--url", service.url]
    result = CliRunner().invoke(cli, [*args, "--token", service.token])
    assert result.exit_code == 0, result.output
    assert "run ppo-a (id" in result.output and "11 new points" in result.output
    assert "pass rate: 'val/test_score/openai/gsm8k'; compute (gpu_hours): sum of 'timing_s/step'" in result.output
    with Client(service.url, service.token) as api:
        exp = api.find_experiment("verl-past")
        assert exp is not None
        runs = {r["name"]: r for r in api.request("GET", "/api/v1/runs", params={"experiment_id": exp["id"]})}
        assert runs["ppo-a"]["status"] == "succeeded" and runs["ppo-a"]["n_points"] == 11
        assert runs["ppo-b"]["n_points"] == 9
        assert sorted(runs) == ["ppo-a", "ppo-b"]  # no placeholder run
        assert exp["document"]["compute_unit"] == "gpu_hours" and exp["document"]["kind"] == "tracking"
        stored = api.get_points(runs["ppo-a"]["id"])
        assert [p["pass_rate"] for p in stored if p["pass_rate"] is not None] == [0.313, 0.622, 0.657]
    again = CliRunner().invoke(cli, [*args, "--token", service.token])
    assert again.exit_code == 0 and "0 new points, 11 already stored" in again.output

    out = tmp_path / "csv"
    written = CliRunner().invoke(cli, ["import", str(a), "--x-per-step", "response_length/mean", "--gpus", "256",
                                       "--csv-out", str(out)])  # fmt: skip
    assert written.exit_code == 0, written.output
    fit = CliRunner().invoke(cli, ["fit", str(out / "ppo-a.csv"), "--x", "compute", "--y", "pass_rate"])
    # fit reads the columns; 3 evaluations are too few for a forecast, which exits 1 with the reason
    assert fit.exit_code == 1 and fit.output.startswith("compute -> pass_rate: insufficient_data"), fit.output

    bad = CliRunner().invoke(cli, ["import", str(a), "--y", "nope", "--csv-out", str(out)])
    assert bad.exit_code == 2 and "no column 'nope'" in bad.output


def test_watch_follows_a_growing_verl_log_until_stop(service: Service, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    lines = verl_console_log().splitlines(keepends=True)
    log.write_text("".join(lines[:9]))  # the job has started: initial validation and step 1
    flag = tmp_path / "stop-requested"
    done = threading.Event()

    def job() -> None:  # the trainer keeps writing; the user presses stop once a few steps arrived
        with Client(service.url, service.token) as api:
            for line in lines[9:]:
                time.sleep(0.02)
                with log.open("a") as fh:
                    fh.write(line[: len(line) // 2])
                    fh.flush()
                    time.sleep(0.02)  # a half-written line must wait for its newline
                    fh.write(line[len(line) // 2 :])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not done.is_set():
                run = api.find_run("verl-live", 1) if api.find_experiment("default") else None
                if run is not None and run.n_points >= 10:
                    api.stop_run(run.id, "forecast below baseline")
                    return
                time.sleep(0.1)

    writer = threading.Thread(target=job, daemon=True)
    writer.start()
    result = CliRunner().invoke(cli, ["watch", str(log), "--run", "verl-live", "--gpus", "8", "--interval", "0.1",
                                      "--settle", "0.5", "--on-stop", f"touch {flag}", "--url", service.url,
                                      "--token", service.token])  # fmt: skip
    done.set()
    writer.join(timeout=10)
    assert result.exit_code == 3, result.output
    assert flag.exists() and "the service says stop" in result.output
    with Client(service.url, service.token) as api:
        run = api.find_run("verl-live", 1)
        assert run is not None and run.status == "stopped"  # after --on-stop ran (was stopping for ever)
        stored = api.get_points(run.id)
    assert [p["step"] for p in stored] == list(range(11))
    assert [p["pass_rate"] for p in stored if p["pass_rate"] is not None] == [0.313, 0.622, 0.657]
    assert stored[5]["metrics"]["critic/score/mean"] == 0.715


def test_watch_reads_a_log_in_percent_as_import_does(service: Service, tmp_path: Path) -> None:
    """A JSONL log whose pass rate is in percent is divided by 100 (with a note), as `scalerl import` and
    `scalerl fit` read it; before, every value was dropped as outside [0, 1] and no forecast ever came."""
    log = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "val/pass_rate": v, "loss": 1.0 / (s + 1)} for s, v in enumerate((12.5, 30.0, 41.0, 47.5))]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(cli, ["watch", str(log), "--run", "pct", "--y", "val/pass_rate", "--interval", "0.1",
                                      "--settle", "0.2", "--idle-exit", "1", "--url", service.url,
                                      "--token", service.token])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "read as percentages" in result.output
    with Client(service.url, service.token) as api:
        run = api.find_run("pct", 1)
        assert run is not None
        stored = api.get_points(run.id)
    assert [p["pass_rate"] for p in stored] == pytest.approx([0.125, 0.3, 0.41, 0.475])
    assert run.status == "succeeded"  # the end of the log (--idle-exit) is the end of the run


def test_watch_refused_at_start_says_why_without_a_traceback(service: Service, tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": s, "val/pass_rate": 0.1 * s}) + "\n" for s in range(1, 4)))
    with Client(service.url, service.token) as api:
        api.register_run("taken")
    result = CliRunner().invoke(cli, ["watch", str(log), "--run", "taken", "--y", "val/pass_rate", "--resume", "never",
                                      "--interval", "0.1", "--idle-exit", "1", "--url", service.url,
                                      "--token", service.token])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "the service refused run taken" in result.output and "409" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
