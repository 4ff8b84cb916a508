"""``scalerl db upgrade``, ``scalerl token`` and ``scalerl submit`` (against a real HTTP server): exit codes and
one-line errors."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner

from scalerl.cli.main import cli
from server.store.migrate import head
from tests.server.conftest import Service
from tests.server.helpers import LOO_YAML, curve_points, sweep_doc
from tests.server.live import served


@pytest.fixture
def live(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[Service, str]]:
    db = tmp_path / "cli.db"
    shutil.copy(sqlite_template, db)
    with served(f"sqlite:///{db}", tmp_path) as both:
        yield both


def _env(tmp_path: Path, url: str, service: Service) -> dict[str, str]:
    token = service.write["Authorization"].split()[1]
    return {"SCALERL_HOME": str(tmp_path / "home"), "SCALERL_URL": url, "SCALERL_TOKEN": token}


def test_db_upgrade_creates_embedded_database_and_first_token(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"SCALERL_HOME": str(tmp_path / "home"), "SCALERL_DATABASE_URL": ""}
    r = runner.invoke(cli, ["db", "upgrade"], env=env)
    assert r.exit_code == 0, r.output
    assert f"revision {head()}" in r.output
    creds = json.loads((tmp_path / "home" / "credentials.json").read_text())
    assert creds["token"].startswith("srl_") and (tmp_path / "home" / "credentials.json").stat().st_mode & 0o077 == 0
    listed = runner.invoke(cli, ["token", "list"], env=env)
    assert "first-token\tadmin" in listed.output
    again = runner.invoke(cli, ["db", "upgrade"], env=env)  # idempotent, no second token
    assert again.exit_code == 0 and runner.invoke(cli, ["token", "list"], env=env).output.count("\n") == 1
    created = runner.invoke(cli, ["token", "create", "ci", "--scope", "write"], env=env)
    token = json.loads(created.output)
    assert token["scopes"] == ["write"] and token["token"].startswith("srl_")
    assert runner.invoke(cli, ["token", "revoke", str(token["id"])], env=env).exit_code == 0
    missing = runner.invoke(cli, ["token", "revoke", "999"], env=env)
    assert missing.exit_code == 2 and missing.output.strip() == "error: token 999 does not exist"


def test_submit_dry_run_and_errors(live: tuple[Service, str], tmp_path: Path) -> None:
    service, url = live
    runner = CliRunner()
    env = _env(tmp_path, url, service)
    grid = tmp_path / "loo.yaml"
    grid.write_text(LOO_YAML.format(name="cli-loo"))
    r = runner.invoke(cli, ["submit", str(grid), "--dry-run"], env=env)
    assert r.exit_code == 0, r.output
    assert "7 runs, total budget 112000" in r.output
    assert "forecasts: team prior: 0 succeeded run(s) of task 'gsm8k'" in r.output  # which prior, and why
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**sweep_doc(), "grid": {"batch.prompt": [1]}}))
    r = runner.invoke(cli, ["submit", str(bad)], env=env)
    assert r.exit_code == 2 and r.output.startswith("error: server answered 422") and r.output.count("\n") == 1
    r = runner.invoke(cli, ["submit", str(grid), "--wait", "--fail-if", "best>=x"], env=env)
    assert r.exit_code == 2 and "allowed: undecided" in r.output
    r = runner.invoke(cli, ["submit", str(tmp_path / "nope.yaml")], env=env)
    assert r.exit_code == 2 and "does not exist" in r.output
    r = runner.invoke(cli, ["submit", str(grid)], env={**env, "SCALERL_TOKEN": "srl_wrong"})
    assert r.exit_code == 6 and "401" in r.output  # auth, not bad input (scalerl/cli/exit_codes.py)
    r = runner.invoke(cli, ["submit", str(grid)], env={**env, "SCALERL_URL": "http://127.0.0.1:9"})
    assert r.exit_code == 5 and "cannot reach the server" in r.output  # unreachable


def test_submit_wait_gates_on_the_verdict(live: tuple[Service, str], tmp_path: Path) -> None:
    service, url = live
    runner = CliRunner()
    env = _env(tmp_path, url, service)
    grid = tmp_path / "sweep.json"
    grid.write_text(json.dumps(sweep_doc(name="gate")))

    def trainer() -> None:
        """Plays the workers: waits for the experiment, then reports curves with different ceilings."""
        for _ in range(200):
            runs = httpx.get(f"{url}/api/v1/runs", headers=service.read).json()
            if len(runs) == 2:
                break
            time.sleep(0.05)
        for run, a in zip(runs, (0.66, 0.46), strict=True):
            httpx.post(
                f"{url}/api/v1/runs/{run['id']}/metrics",
                json={"points": curve_points(A=a, n=40, seed=run["id"])},
                headers=service.write,
            )

    t = threading.Thread(target=trainer, daemon=True)
    t.start()
    args = ["submit", str(grid), "--wait", "--poll", "0.2", "--timeout", "60"]
    r = runner.invoke(cli, [*args, "--fail-if", "best!=batch.prompts=32,seed=0", "--fail-if", "A<0.6"], env=env)
    t.join(10)
    assert r.exit_code == 0, r.output
    assert "verdict (decided): best=batch.prompts=32,seed=0" in r.output
    assert "forecasts: team prior: 0 succeeded run(s) of task 'gsm8k' with model 'tiny'" in r.output

    grid.write_text(json.dumps(sweep_doc(name="gate-timeout")))
    r = runner.invoke(cli, [*args[:-1], "1", "--fail-if", "undecided"], env=env)
    assert r.exit_code == 1 and "fail-if: undecided" in r.output
    grid.write_text(json.dumps(sweep_doc(name="gate-timeout-2")))
    r = runner.invoke(cli, [*args[:-1], "1"], env=env)
    assert r.exit_code == 3 and "timed out" in r.output


def test_database_problems_are_one_line_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"SCALERL_HOME": str(tmp_path / "empty"), "SCALERL_DATABASE_URL": ""}
    r = runner.invoke(cli, ["token", "list"], env=env)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "scalerl db upgrade" in r.output
    r = runner.invoke(cli, ["db", "upgrade", "--revision", "nope"], env=env)
    assert r.exit_code == 2 and r.output.startswith("error: migration failed")
    r = runner.invoke(cli, ["db", "upgrade", "--database-url", "postgresql://postgres@127.0.0.1:1/x"], env=env)
    assert r.exit_code == 2 and "Connection refused" in r.output and r.output.count("\n") == 1
