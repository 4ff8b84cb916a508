"""In the TRL callback, without training: which resume policy a fresh and a resumed trainer register with,
the config it reports from the TrainingArguments, and the warning when no evaluation holds a pass rate."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerControl, TrainerState, TrainingArguments

from scalerl.integrations import trl as trl_mod
from scalerl.integrations.trl import ScalerlCallback, args_config


class FakeReporter:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.logged: list[tuple[int, float, float | None]] = []
        self.should_stop = False
        self.run_id = 1

    def log(self, step: int, compute: float, pass_rate: float | None, metrics: Any = None) -> str:
        self.logged.append((step, compute, pass_rate))
        return "continue"

    def wait_for_run(self, timeout: float) -> int:
        return 1


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[FakeReporter]:
    made: list[FakeReporter] = []

    def start(name: str, **kwargs: Any) -> FakeReporter:
        rep = FakeReporter(name=name, **kwargs)
        made.append(rep)
        return rep

    monkeypatch.setattr(trl_mod.Reporter, "start", staticmethod(start))
    return made


def _args(tmp_path: Path) -> TrainingArguments:
    return TrainingArguments(output_dir=str(tmp_path / "out"), learning_rate=3e-6, per_device_train_batch_size=4,
                             seed=7, report_to=[], use_cpu=True)  # fmt: skip


def test_fresh_training_starts_auto_and_a_resumed_one_continues(tmp_path: Path, started: list[FakeReporter]) -> None:
    args = _args(tmp_path)
    ScalerlCallback("fresh").on_train_begin(args, TrainerState(), TrainerControl())
    resumed = TrainerState(global_step=40)
    cb = ScalerlCallback("resumed", compute="tokens")
    cb.on_train_begin(args, resumed, TrainerControl())
    ScalerlCallback("chosen", resume="never").on_train_begin(args, TrainerState(), TrainerControl())
    assert [r.kwargs["resume"] for r in started] == ["auto", "allow", "never"]
    config = started[0].kwargs["config"]
    assert config["learning_rate"] == 3e-6 and config["per_device_train_batch_size"] == 4 and config["seed"] == 7
    assert config == args_config(args) and all(isinstance(v, bool | int | float | str) for v in config.values())


def _no_evaluation_warnings(tmp_path: Path, caplog: pytest.LogCaptureFixture, evaluate_at: int | None) -> list[str]:
    """Train a callback for 11 logged steps (an evaluation with a pass rate at ``evaluate_at``, if given) and
    return its "no evaluation" warnings."""
    args, state, control = _args(tmp_path), TrainerState(), TrainerControl()
    cb = ScalerlCallback("run", warn_after_steps=5)
    cb.on_train_begin(args, state, control)
    with caplog.at_level(logging.WARNING, logger="scalerl.integrations.trl"):
        for step in range(1, 12):
            state.global_step = step
            logs = {"loss": 1.0 / step, "reward": 0.1, **({"eval_reward": 0.3} if step == evaluate_at else {})}
            cb.on_log(args, state, control, logs=logs)
    return [r.getMessage() for r in caplog.records if "no evaluation" in r.getMessage()]


def test_no_evaluation_is_warned_about_once(
    tmp_path: Path, started: list[FakeReporter], caplog: pytest.LogCaptureFixture
) -> None:
    warnings = _no_evaluation_warnings(tmp_path, caplog, evaluate_at=None)
    assert len(warnings) == 1 and "eval_reward" in warnings[0] and "eval_strategy" in warnings[0]


def test_an_evaluated_run_is_not_warned_about(
    tmp_path: Path, started: list[FakeReporter], caplog: pytest.LogCaptureFixture
) -> None:
    assert not _no_evaluation_warnings(tmp_path, caplog, evaluate_at=2)
