"""`scalerl import` reads MLflow stores by URI as MLflow users have them (MLflow 3 refuses new
`./mlruns` folders without MLFLOW_ALLOW_FILE_STORE, so new users have sqlite:// or server stores): the URI is kept
verbatim (a path type collapsed `sqlite:///` into `sqlite:/`), and a missing store or an unreachable server is one
clear line, never a traceback nor an empty store created on the way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from scalerl.cli.main import cli

mlflow = pytest.importorskip("mlflow")


def write_store(uri: str) -> None:
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("grpo")
    for name, top in (("lr-1e-6", 0.6), ("lr-3e-6", 0.7)):
        run = client.create_run(exp, run_name=name)
        for step in range(0, 60, 10):
            client.log_metric(run.info.run_id, "eval/accuracy", top * step / 60 + 0.1, step=step)
            client.log_metric(run.info.run_id, "train/loss", 1.0 / (step + 1), step=step)
        client.set_terminated(run.info.run_id)


def test_import_reads_a_sqlite_store_by_uri(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    write_store(uri)
    out = tmp_path / "curves"
    result = CliRunner().invoke(cli, ["import", uri, "--csv-out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["lr-1e-6.csv", "lr-3e-6.csv"]
    assert "pass rate: 'eval/accuracy'" in result.output


def test_import_reads_a_file_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = tmp_path / "mlruns"
    write_store(store.as_uri())
    result = CliRunner().invoke(cli, ["import", store.as_uri(), "--csv-out", str(tmp_path / "curves")])
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "curves").iterdir())) == 2


def test_missing_and_unreachable_stores_are_one_line(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'nope.db'}"
    result = CliRunner().invoke(cli, ["import", missing, "--csv-out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "no such file" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "nope.db").exists()  # no empty store created
    env = {**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    down = CliRunner(env=env).invoke(cli, ["import", "http://127.0.0.1:9/", "--csv-out", str(tmp_path / "c")])
    assert down.exit_code == 2, down.output
    assert "http://127.0.0.1:9/: cannot read the MLflow store" in down.output and "Traceback" not in down.output
    assert len(down.output.strip().splitlines()) == 1
