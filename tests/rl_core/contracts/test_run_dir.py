"""The run-directory contract: the layout's checkpoint pointer and the resume rule shared by engine and worker."""

from __future__ import annotations

from pathlib import Path

from rl_core.contracts.run_dir import RESUME_MUTABLE, RunDir, changed_on_resume, latest_checkpoint


def test_latest_checkpoint_needs_a_complete_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert latest_checkpoint(run.checkpoints) is None and not run.holds_run()
    (run.checkpoints / "step_000004").mkdir(parents=True)
    (run.checkpoints / "latest").write_text("step_000004")
    assert latest_checkpoint(run.checkpoints) is None  # no engine.json: incomplete
    (run.checkpoints / "step_000004" / "engine.json").write_text("{}")
    assert latest_checkpoint(run.checkpoints) == run.checkpoints / "step_000004" and run.holds_run()


def test_only_mutable_sections_may_change_on_resume() -> None:
    saved = {"name": "r", "budget": {"steps": 4}, "device": "cpu", "recipe": {"a": 1}}
    assert changed_on_resume(saved, saved | {"budget": {"steps": 8}, "device": "cuda:0"}) == []
    assert changed_on_resume(saved, saved | {"recipe": {"a": 2}, "seed": 1}) == ["recipe", "seed"]
    assert set(RESUME_MUTABLE) == {"budget", "device", "threads", "sinks"}
