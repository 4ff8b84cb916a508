"""``scalerl demo``: its grid is valid for the service and every run becomes a valid engine config for the worker;
``--offline`` still forecasts the bundled run. (Starting the whole demo trains models: see docs/dashboard.md.)"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from scalerl.cli.demo_cmd import (
    DEMO_CONFIG,
    demo_cmd,
    demo_document,
    engine_template,
    load_config,
    submit_when_up,
)
from server.lifecycle.demo_grid import DEMO_GRIDS
from server.lifecycle.grid import expand, parse_document
from server.runtime.bootstrap import write_credentials
from tests.web.conftest import LiveService


@pytest.mark.parametrize("grid", ["lr", "leave-one-out"])
def test_each_demo_grid_is_scalerl_that_the_worker_can_run(tmp_path: Path, grid: str) -> None:
    engine_config = pytest.importorskip("worker.engine_config")
    if not DEMO_CONFIG.is_file():
        pytest.skip(f"{DEMO_CONFIG} (the engine's CPU demo config) is not in this checkout")
    config = load_config(DEMO_CONFIG)
    doc = demo_document(config, 0.01, grid)
    runs = expand(parse_document(doc))
    assert doc["name"] == DEMO_GRIDS[grid].name
    if grid == "leave-one-out":
        assert len(runs) == 7 and runs[0].name == "base,seed=0" and doc["policy"] == {"mode": "recommend"}
        assert {next(iter(r.overrides)) for r in runs[1:]} >= {"loss.type", "precision.fp32_lm_head"}
    else:  # learning rates around the tuned one (the config's), stops on
        lrs = [r.recipe["optimizer"]["lr"] for r in runs]
        # the tuned rate first: runs train one after another and the others are stopped against it
        assert len(runs) == 4 and lrs[0] == config["recipe"]["optimizer"]["lr"] and doc["policy"]["mode"] == "auto_stop"
        assert min(lrs) < config["recipe"]["optimizer"]["lr"] < max(lrs)
    assert all(r.recipe["batch"]["prompts"] == config["recipe"]["batch"]["prompts"] for r in runs)
    template = yaml.safe_load(engine_template(config, tmp_path).read_text())
    assert not {"recipe", "model", "task", "name", "seed"} & set(template)
    for i, planned in enumerate(runs):
        run = {
            "id": i + 1,
            "seed": planned.seed,
            "recipe": planned.recipe,
            "task": doc["task"],
            "model": doc["model"],
            "budget": planned.budget,
        }
        cfg = engine_config.engine_config(run, doc["compute_unit"], template, device="cpu", steps=1000)
        assert cfg["budget"]["max_device_hours"] == 0.01
        assert cfg["task"] == {**cfg["task"], **config["task"]} and cfg["base_checkpoint"]["enabled"]
        assert cfg["recipe"]["sampling"] == {**cfg["recipe"]["sampling"], **config["recipe"].get("sampling", {})}


def test_a_missing_demo_config_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(demo_cmd, ["--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.output and "--offline" in result.output


def test_a_missing_demo_config_is_named_even_behind_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(demo_cmd, ["--port", str(port), "--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.output, result.output


def test_a_demo_config_that_is_not_yaml_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("recipe: [unclosed\n", encoding="utf-8")
    result = CliRunner().invoke(demo_cmd, ["--config", str(bad)])
    assert result.exit_code == 2
    assert "is not valid YAML" in result.output and "Traceback" not in result.output, result.output


def test_offline_demo_forecasts_the_bundled_run(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    result = CliRunner().invoke(demo_cmd, ["--offline", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "forecast at the end" in result.output and out.is_file()


def test_the_demo_submits_its_grid_once_and_prints_a_signed_in_link(live: LiveService, tmp_path: Path) -> None:
    write_credentials(tmp_path / "credentials.json", live.url, live.admin_token)
    config = {"recipe": {"preset": "scalerl"}, "model": {"preset": "tiny"}, "task": {"kind": "synthetic-addition"}}
    lines: list[str] = []
    submit_when_up(live.url, tmp_path, demo_document(config, 0.01), lines.append, threading.Event())
    assert any(line.startswith("submitted 4 runs of 0.01 device-hours") for line in lines), lines
    link = next(line for line in lines if "dashboard:" in line).split()[-1]
    assert link.startswith(f"{live.url}/experiments/") and link.endswith(f"#token={live.admin_token}")
    again: list[str] = []
    submit_when_up(live.url, tmp_path, demo_document(config, 0.01), again.append, threading.Event())
    assert any("exists" in line for line in again) and any(link in line for line in again)
    with live.client() as api:
        assert sum(e["name"] == DEMO_GRIDS["lr"].name for e in api.get("/api/v1/experiments").json()) == 1


def _port_taken_by_another_program(port: int) -> bool:
    """Whether a program binding as uvicorn does (SO_REUSEADDR) and listening would get ``port``."""
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            other.bind(("127.0.0.1", port))
            other.listen()
        except OSError:
            return True
    return False


def test_the_demo_holds_its_port_through_the_base_model_build_until_the_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    import scalerl.cli.demo_cmd as demo
    import worker.embedded as embedded

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    seen: dict[str, bool] = {}

    def slow_build(*args: object, **kwargs: object) -> None:
        seen["taken_during_build"] = _port_taken_by_another_program(port)
        return None

    def spawn(name: str, args: list[str], env: object, logs: object) -> object:
        seen["free_when_the_server_starts"] = not _port_taken_by_another_program(port)
        raise embedded.UpError("stop here: the server would start now")

    monkeypatch.setenv("SCALERL_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(demo, "build_base_model", slow_build)
    monkeypatch.setattr(demo, "submit_when_up", lambda *a, **k: None)
    monkeypatch.setattr(embedded, "_spawn", spawn)
    monkeypatch.setattr(embedded, "stop_on_signals", lambda: None)
    monkeypatch.setattr(demo, "engine_template", lambda *args, **kwargs: tmp_path / "engine.yaml")
    monkeypatch.setattr(demo, "demo_document", lambda *args, **kwargs: {"budget": 0.05})
    result = CliRunner().invoke(demo_cmd, ["--port", str(port), "--config", str(DEMO_CONFIG)])
    assert "stop here" in result.output, result.output
    assert seen == {"taken_during_build": True, "free_when_the_server_starts": True}
    assert not _port_taken_by_another_program(port)  # released when the demo ends


def test_a_held_port_is_refused_to_others_and_released_once() -> None:
    from worker.embedded import UpError, hold_port, port_problem

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    held = hold_port("127.0.0.1", port)
    assert held.held and _port_taken_by_another_program(port)
    assert port_problem("127.0.0.1", port) is not None
    with pytest.raises(UpError, match="in use"):
        hold_port("127.0.0.1", port)
    held.release()
    held.release()
    assert not held.held and not _port_taken_by_another_program(port)
