"""File and console sinks: one line per point, truncation on resume, increasing steps."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from rl_core.contracts.points import MetricPoint, read_points
from rl_core.engine.sinks import ConsoleSink, CsvSink, JsonlSink, MultiSink


def _point(step: int, **metrics: float) -> MetricPoint:
    return MetricPoint(step=step, compute=step / 100, pass_rate=0.5 if step % 2 == 0 else None, metrics=metrics)


def test_jsonl_and_csv_round_trip_and_truncate(tmp_path: Path) -> None:
    sink = MultiSink([JsonlSink(tmp_path / "m.jsonl"), CsvSink(tmp_path / "m.csv")])
    for s in range(5):
        assert sink.write(_point(s, **{"train/loss": float(s)}, **({"eval/x": 1.0} if s == 3 else {}))) == "continue"
    sink.truncate_after(2)
    sink.write(_point(3, **{"train/loss": 30.0}))
    sink.close("succeeded", "done")
    points = read_points(tmp_path / "m.jsonl")
    assert [p.step for p in points] == [0, 1, 2, 3]
    assert points[3].metrics["train/loss"] == 30.0 and points[0].pass_rate == 0.5 and points[1].pass_rate is None
    with (tmp_path / "m.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["step"] for r in rows] == ["0", "1", "2", "3"]
    assert rows[3]["train/loss"] == "30.0"


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    JsonlSink(path).write(_point(0))
    with path.open("a") as fh:
        fh.write('{"step": 1, "comp')
    assert [p.step for p in read_points(path)] == [0]


def test_steps_must_increase_and_console_prints() -> None:
    out = io.StringIO()
    sink = MultiSink([ConsoleSink(10, stream=out)])
    sink.write(_point(1, **{"train/reward_mean": 0.25}))
    with pytest.raises(ValueError, match="increase"):
        sink.write(_point(1))
    sink.close("failed", "boom")
    text = out.getvalue()
    assert "step     1/10" in text and "reward +0.250" in text and "run failed: boom" in text
