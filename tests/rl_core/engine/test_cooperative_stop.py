"""A stop decided by the service reaches the engine cooperatively: it checkpoints the step it stopped at, ends as
``stopped`` with the reason, and ``--resume`` continues the curve from there."""

from __future__ import annotations

import json
from pathlib import Path

from pytest import MonkeyPatch

from rl_core.contracts.points import MetricPoint, read_points
from rl_core.contracts.run_config import parse_run_config
from rl_core.engine import runner
from rl_core.engine.runner import build_sinks, run
from rl_core.engine.sinks import FinalStatus, MultiSink, SinkAction
from tests.support.tiny_run import tiny_config


class StopAt:
    """Answers ``stop`` from ``step`` on, as the HTTP reporter relays the service's ``action``."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.closed: tuple[FinalStatus, str] | None = None

    def write(self, point: MetricPoint) -> SinkAction:
        return "stop" if point.step >= self.step else "continue"

    def truncate_after(self, step: int) -> None:
        del step

    def close(self, status: FinalStatus, reason: str) -> None:
        self.closed = (status, reason)


def test_a_stop_checkpoints_the_step_and_resume_continues_from_it(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    cfg = parse_run_config(tiny_config(**{"budget.steps": 8, "checkpoint.every": 100}))
    stopper = StopAt(3)
    with monkeypatch.context() as m:  # the run's own sinks plus the stopper, built after the directory is checked
        m.setattr(runner, "build_sinks", lambda c, out: MultiSink([*build_sinks(c, out).sinks, stopper]))
        result = run(cfg, tmp_path)
    assert result.status == "stopped" and "stop requested" in result.reason
    assert stopper.closed is not None and stopper.closed[0] == "stopped"
    # The checkpoint is the stop's own step, although checkpoint.every would not have written one there.
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000003"
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "stopped"
    before = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in before] == [0, 1, 2, 3]

    resumed = run(cfg, tmp_path, resume=True)
    assert resumed.status == "succeeded", resumed.reason
    points = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in points] == list(range(9))
    assert [p.to_json() for p in points[:4]] == [p.to_json() for p in before]
