"""The metric-point contract: one reader of metrics.jsonl, one REST shape, shared by the engine and the worker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rl_core.contracts.points import (
    MAX_METRICS,
    METRIC_NAME_MAX,
    MetricPoint,
    MetricsTail,
    read_points,
    to_rest,
)
from rl_core.engine.sinks import HttpReporter, JsonlSink
from tests.support.http import Reply, Request, json_reply, local_service


def test_tail_reads_appended_lines_once_and_restarts_on_replace(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read() == []
    with path.open("w") as fh:
        fh.write('{"step": 0, "compute": 0.0}\n{"step": 1, "comp')
    assert [p.step for p in tail.read()] == [0]
    with path.open("a") as fh:
        fh.write('ute": 1.0}\nnot json\n{"step": "2", "compute": 1.0}\n')
    assert [(p.step, p.compute) for p in tail.read()] == [(1, 1.0)]
    assert tail.read() == []
    tmp = tmp_path / "x.tmp"
    tmp.write_text('{"step": 0, "compute": 0.0}\n')
    tmp.replace(path)  # what the engine's truncate_after does on resume
    assert [p.step for p in tail.read()] == [0]


def test_read_points_skips_torn_and_bad_lines_and_keeps_a_complete_unterminated_one(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert read_points(path) == []
    path.write_text('{"step": 0, "compute": 0.5, "metrics": {"a": 1, "s": "x"}}\n[1]\n{"step": 1, "compute": 1.0}')
    points = read_points(path)
    assert [p.step for p in points] == [0, 1] and points[0].metrics == {"a": 1.0}
    path.write_text('{"step": 0, "compute": 0.5}\n{"step": 1, "com')
    assert [p.step for p in read_points(path)] == [0]


def test_rest_shape_keeps_finite_values_within_the_service_limits() -> None:
    point = MetricPoint(
        step=3,
        compute=-1.0,
        pass_rate=float("nan"),
        wall_time=2.0,
        metrics={"a": 1, "b": float("inf"), "x" * 150: 2.0},
    )
    assert to_rest(point) == {"step": 3, "compute": 0.0, "pass_rate": None, "metrics": {"a": 1.0, "x" * 100: 2.0}}
    many = {f"z/{i:03d}": float(i) for i in range(100)} | {"train/loss": 0.5, "eval/k": 1.0}
    kept = to_rest(MetricPoint(step=0, compute=1e40, pass_rate=0.5, metrics=many))
    assert len(kept["metrics"]) == MAX_METRICS and list(kept["metrics"])[:2] == ["eval/k", "train/loss"]
    assert kept["compute"] == 1e30 and kept["pass_rate"] == 0.5
    assert all(len(k) <= METRIC_NAME_MAX for k in kept["metrics"])


def test_the_service_accepts_every_rest_point() -> None:
    pytest.importorskip("fastapi")
    from server.intake.schemas import MetricPoint as PointIn

    many = {f"m{i}" * 30: float(i) for i in range(200)} | {"nan": float("nan")}
    point = MetricPoint(step=2**62, compute=float("inf"), pass_rate=1.0, metrics=many)
    PointIn.model_validate(to_rest(point))  # raises if the contract's limits and the schema's disagree


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    """A service that records every ``(path, JSON body)`` posted and answers ``continue``: its URL and the list."""
    seen: list[tuple[str, Any]] = []

    def record(request: Request) -> Reply:
        seen.append((request.path, request.json()))
        return json_reply(200, {"action": "continue"})

    with local_service(record) as url:
        yield url, seen


def test_engine_reporter_and_worker_send_the_same_points(
    tmp_path: Path, recorder: tuple[str, list[tuple[str, Any]]]
) -> None:
    """The engine's HttpReporter posts what the worker would post for the same metrics.jsonl lines."""
    url, seen = recorder
    points = [
        MetricPoint(step=0, compute=0.0, pass_rate=0.1, metrics={"train/loss": 2.0, "bad": float("nan")}),
        MetricPoint(step=1, compute=0.5, metrics={"x" * 120: 1.0}),
    ]
    sink = JsonlSink(tmp_path / "metrics.jsonl")
    reporter = HttpReporter(url, 7, "tok", lease_id="lease-1", retries=0)
    for p in points:
        sink.write(p)
        reporter.write(p)
    reporter.close("succeeded", "")
    worker_side = [to_rest(p) for p in MetricsTail(tmp_path / "metrics.jsonl").read()]
    posted = [body["points"][0] for path, body in seen if "/metrics" in path]
    assert posted == worker_side
    assert all(path == "/api/v1/runs/7/metrics?lease_id=lease-1" for path, _ in seen[:2])
    assert seen[-1] == (
        "/api/v1/runs/7/status",
        {"status": "succeeded", "reason": "succeeded", "lease_id": "lease-1"},
    )


def test_contracts_and_the_run_config_never_import_torch() -> None:
    code = (
        "import sys\n"
        "import rl_core.contracts.points, rl_core.contracts.run_dir, rl_core.contracts.run_config\n"
        "from rl_core.contracts.run_config import parse_run_config\n"
        "parse_run_config({'name': 'x', 'model': {'preset': 'tiny'}, 'task': {'kind': 'synthetic-addition'},"
        " 'budget': {'steps': 2}, 'recipe': 'scalerl'})\n"
        "import worker.engine_config, rl_core.engine.sinks\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_reporter_whose_lease_was_taken_stops_and_writes_nothing_more() -> None:
    seen: list[str] = []

    def lease_taken(request: Request) -> Reply:
        seen.append(request.path)
        return json_reply(409, {"detail": "the lease is held by another attempt"})

    with local_service(lease_taken) as url:
        reporter = HttpReporter(url, 3, "tok", lease_id="old", retries=0)
        assert reporter.write(MetricPoint(step=0, compute=0.0)) == "stop" and reporter.lease_lost
        assert reporter.write(MetricPoint(step=1, compute=1.0)) == "stop"
        reporter.close("stopped", "stop requested")
    assert seen == ["/api/v1/runs/3/metrics?lease_id=old"]
