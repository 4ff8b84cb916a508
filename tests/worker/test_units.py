"""Worker pieces without processes: settings validation, Celery configuration, the JSONL tail, the run → engine
config mapping and the run directory's resume decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import ValidationError

from rl_core.contracts.points import MetricPoint, to_rest
from scalerl.client.api import Client
from scalerl.client.retry import Backoff
from tests.support.tiny_run import TINY_RECIPE
from tests.worker.cluster import MODEL, TASK
from worker.celery_app import CPU_QUEUE, DELIVER_ALERTS, EXECUTE_RUN, GPU_QUEUE, make_celery
from worker.engine_config import EngineConfigError, engine_config, prepare_run_dir
from worker.settings import WorkerSettings


def settings(tmp_path: Path, **kw: Any) -> WorkerSettings:
    return WorkerSettings(home=tmp_path, **kw)


def test_embedded_defaults_and_saved_credentials(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text(json.dumps({"url": "http://127.0.0.1:9999/", "token": "srl_x"}))
    s = settings(tmp_path)
    assert s.broker_url == f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}" and s.broker_kind == "sqla"
    assert s.database_url == f"sqlite:///{tmp_path / 'scalerl.db'}"
    assert (s.server_url, s.token, s.run_root) == ("http://127.0.0.1:9999", "srl_x", tmp_path / "runs")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"lease_seconds": 10, "heartbeat_seconds": 5}, "at least 3"),
        ({"visibility_timeout": 30, "lease_seconds": 60}, "visibility_timeout"),
        ({"engine_device": "tpu"}, "engine_device"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_invalid_settings_are_refused_with_the_reason(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        settings(tmp_path, **kw)


def test_celery_routing_and_long_run_options(tmp_path: Path) -> None:
    import kombu.transport.sqlalchemy

    app = make_celery(settings(tmp_path))
    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost and conf.worker_prefetch_multiplier == 1
    assert (
        conf.task_routes[EXECUTE_RUN]["queue"] == GPU_QUEUE and conf.task_routes[DELIVER_ALERTS]["queue"] == CPU_QUEUE
    )
    assert {(q.name, q.routing_key) for q in conf.task_queues} == {("gpu", "gpu"), ("cpu", "cpu")}
    assert kombu.transport.sqlalchemy.Transport.polling_interval == pytest.approx(0.05)
    assert "polling_interval" not in conf.broker_transport_options  # would be forwarded to create_engine
    assert not conf.worker_enable_remote_control  # the SQLAlchemy transport has no fanout
    redis = make_celery(settings(tmp_path, broker_url="redis://127.0.0.1:6390/0", visibility_timeout=90000))
    assert redis.conf.broker_transport_options == {"visibility_timeout": 90000}


def test_backoff_doubles_up_to_the_cap() -> None:
    b = Backoff(cap=3.0)
    delays = []
    for _ in range(5):
        b.fail(100.0)
        delays.append(b.next_at - 100.0)
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]
    b.ok()
    assert b.next_at == 0.0


def run_json(**kw: Any) -> dict[str, Any]:
    from rl_core.recipe import load_recipe, recipe_to_dict

    recipe = recipe_to_dict(load_recipe({**TINY_RECIPE, "preset": "scalerl"}))
    return {"id": 7, "seed": 3, "recipe": recipe, "task": TASK, "model": MODEL, "budget": 2.5, **kw}


def test_engine_config_maps_the_run(tmp_path: Path) -> None:
    template = {"budget": {"steps": 50}, "checkpoint": {"every": 5}, "sinks": {"console": False}}
    cfg = engine_config(run_json(), "gpu_hours", template, device="cpu", steps=1000)
    assert cfg["name"] == "run-7" and cfg["seed"] == 3
    assert cfg["budget"]["steps"] == 50 and cfg["budget"]["max_device_hours"] == 2.5
    assert cfg["task"]["kind"] == "synthetic-addition" and cfg["model"]["hidden_size"] == 32
    assert cfg["checkpoint"]["every"] == 5 and cfg["sinks"]["http"] is None and cfg["sinks"]["jsonl"]
    bare = engine_config(run_json(task="synthetic-sort", model="tiny"), "gpu_hours", {}, device="cpu", steps=9)
    assert bare["task"]["kind"] == "synthetic-sort" and bare["model"]["preset"] == "tiny"
    assert bare["budget"]["steps"] == 9


@pytest.mark.parametrize(
    ("kw", "unit", "message"),
    [
        ({}, "flops", "compute_unit"),
        ({"task": None}, "gpu_hours", "no task"),
        ({"task": "{kind: [unclosed"}, "gpu_hours", "not a valid YAML"),
        ({"task": "no-such-task"}, "gpu_hours", "invalid run config"),
    ],
)
def test_engine_config_errors_say_what_is_wrong(kw: dict[str, Any], unit: str, message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        engine_config(run_json(**kw), unit, {}, device="cpu", steps=10)


def _fake_checkpoint(run_dir: Path, cfg: dict[str, Any]) -> None:
    (run_dir / "checkpoints" / "step_000002").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_000002" / "engine.json").write_text("{}")
    (run_dir / "checkpoints" / "latest").write_text("step_000002")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))


def test_run_dir_resumes_with_a_grown_budget_and_refuses_another_config(tmp_path: Path) -> None:
    cfg = engine_config(run_json(), "gpu_hours", {}, device="cpu", steps=10)
    run_dir = tmp_path / "run-7"
    assert prepare_run_dir(run_dir, cfg) is False and run_dir.is_dir()
    _fake_checkpoint(run_dir, cfg)
    grown = engine_config(run_json(budget=5.0), "gpu_hours", {}, device="cpu", steps=10)
    assert prepare_run_dir(run_dir, grown) is True
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["budget"]["max_device_hours"] == 5.0
    other = engine_config(run_json(seed=4), "gpu_hours", {}, device="cpu", steps=10)
    with pytest.raises(EngineConfigError, match="seed"):
        prepare_run_dir(run_dir, other)


def test_run_dir_without_checkpoint_is_moved_aside(tmp_path: Path) -> None:
    cfg = engine_config(run_json(), "gpu_hours", {}, device="cpu", steps=10)
    run_dir = tmp_path / "run-7"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"step": 0, "compute": 0.0}\n')
    assert prepare_run_dir(run_dir, cfg) is False
    assert list(run_dir.iterdir()) == []
    assert (tmp_path / "run-7.abandoned-1" / "metrics.jsonl").is_file()


class FakeClient:
    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run

    def get_run(self, run_id: int) -> dict[str, Any]:
        return self.run


@pytest.mark.parametrize(
    ("server_run", "grows"),
    [
        ({"budget": 5.0, "compute_used": 2.5}, True),  # ended on its budget, then extended: continue
        ({"budget": 5.0, "compute_used": 1.0}, False),  # ended on its step cap: nothing to continue
        ({"budget": 2.5, "compute_used": 2.5}, False),  # not extended
    ],
)
def test_a_budget_extended_while_running_continues_only_when_the_budget_ended_it(
    tmp_path: Path, server_run: dict[str, Any], grows: bool
) -> None:
    import threading

    from worker.executor import Attempt, RunExecutor

    cfg = engine_config(run_json(), "gpu_hours", {}, device="cpu", steps=10)
    run_dir = tmp_path / "run-7"
    run_dir.mkdir()
    _fake_checkpoint(run_dir, cfg)
    attempt = Attempt(run=run_json(), lease_id="l", run_dir=run_dir, acked_step=-1, cfg=cfg)
    executor = RunExecutor(settings(tmp_path), FakeClient(server_run), threading.Event())  # type: ignore[arg-type]
    assert executor._budget_grew(attempt) is grows
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())["budget"]["max_device_hours"]
    assert saved == (5.0 if grows else 2.5) and attempt.cfg["budget"]["max_device_hours"] == saved


def test_the_executor_counts_every_rejected_point_not_the_50_listed(tmp_path: Path) -> None:
    """An answer lists at most 50 rejected points and counts them all in ``n_rejected``."""
    import threading

    from worker.executor import Attempt, RunExecutor

    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/runs/7/metrics" and request.url.params["lease_id"] == "l"
        batch = json.loads(request.content)["points"]
        sent.extend(batch)
        listed = [{"index": i, "step": p["step"], "errors": ["x"]} for i, p in enumerate(batch[:50])]
        body = {"run_id": 7, "accepted": 0, "duplicates": 0, "rejected": listed, "n_rejected": len(batch),
                "status": "running", "action": "continue"}  # fmt: skip
        return httpx.Response(200, json=body)

    client = Client("http://service", "t", transport=httpx.MockTransport(answer), from_environment=False)
    executor = RunExecutor(settings(tmp_path), client, threading.Event())
    attempt = Attempt(run=run_json(), lease_id="l", run_dir=tmp_path, acked_step=-1)
    attempt.pending = [MetricPoint(step=i, compute=float(i)) for i in range(executor.s.report_batch)]
    executor._post(attempt, Backoff(cap=1.0), 0.0)
    assert attempt.rejected == executor.s.report_batch > 50 and attempt.pending == []
    assert sent == [to_rest(p) for p in (MetricPoint(step=i, compute=float(i)) for i in range(len(sent)))]


def test_engine_config_refuses_paths_outside_the_allowed_roots(tmp_path: Path) -> None:
    from worker.engine_config import EngineConfigError, engine_config

    run = {"id": 1, "seed": 0, "recipe": None, "budget": 1.0, "task": "{kind: math, path: /etc/passwd}"}
    for model in ("/etc", "../../../../root"):
        with pytest.raises(EngineConfigError, match="allowed roots"):
            engine_config({**run, "model": model}, "gpu_hours", {}, device="cpu", steps=1, roots=[str(tmp_path)])


def test_one_rule_names_a_path_for_the_service_and_the_worker(tmp_path: Path) -> None:
    """A hub id (the docs' own example) and ``etc/passwd`` are names, never paths the worker opens;
    the service and the worker decide with the same rule (rl_core.contracts.data_roots.names_path)."""
    from rl_core.contracts.data_roots import names_path
    from server.lifecycle.datapaths import path_problems

    run = {"id": 1, "seed": 0, "recipe": None, "budget": 1.0, "task": "synthetic-addition"}
    for model in ("Qwen/Qwen2.5-0.5B-Instruct", "etc/passwd"):
        assert not names_path(model) and path_problems("gsm8k", model, []) == []
        with pytest.raises(EngineConfigError, match="hub id"):
            engine_config({**run, "model": model}, "gpu_hours", {}, device="cpu", steps=1, roots=[str(tmp_path)])
    for model in ("/etc", "./m", "~/m", "a/../b"):
        assert names_path(model) and path_problems("gsm8k", model, [str(tmp_path)])
    local = tmp_path / "m"
    cfg = engine_config({**run, "model": str(local)}, "gpu_hours", {}, device="cpu", steps=1, roots=[str(tmp_path)])
    assert cfg["model"]["path"] == str(local)
    assert engine_config({**run, "model": "tiny"}, "gpu_hours", {}, device="cpu", steps=1)["model"]["preset"] == "tiny"
