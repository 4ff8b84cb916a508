"""Preemption under TRL: a real GRPOTrainer process (the tiny CPU model of test_trl_callback.py) whose own SIGTERM
handler sets a flag that a TrainerCallback turns into ``control.should_save`` and ``control.should_training_stop``.
SIGTERM mid-training: the checkpoint is saved, the process exits 0, the run ends ``stopped`` with every point;
resumed from that checkpoint, the trainer continues the same run without a false "no evaluation" warning (its
evaluations before the checkpoint are in the restored log history)."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import Service
from tests.services import unavailable
from tests.support.processes import child_env

try:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from scalerl.client import Reporter
    from scalerl.integrations.trl import ScalerlCallback
except ImportError as exc:  # pragma: no cover - the integrations extra is part of CI's install
    unavailable(f"trl/transformers not installed (pip install 'scalerl[integrations]'): {exc}")

TRAINER = """
import signal, sys
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from rl_core.models import ModelConfig, build_model, build_tokenizer
from scalerl.integrations.trl import ScalerlCallback

url, token, out, mode, max_steps = sys.argv[1:6]
torch.set_num_threads(1)
PROMPTS = ["1+1=", "2+2=", "3+1=", "1+2=", "2+3=", "4+1=", "3+3=", "0+2="]


def reward_has_digit(completions, **_):
    return [1.0 if any(c.isdigit() for c in text[:3]) else 0.0 for text in completions]


class SaveOnSigterm(TrainerCallback):
    # The usual pattern: the handler (installed here, before the reporter starts) only sets a flag; the next step's
    # end asks the Trainer to save a checkpoint and stop.
    def __init__(self):
        self.preempted = False
        signal.signal(signal.SIGTERM, self.on_sigterm)

    def on_sigterm(self, signum, frame):
        self.preempted = True

    def on_step_end(self, args, state, control, **kwargs):
        print("step", state.global_step, flush=True)
        if self.preempted:
            control.should_save = True
            control.should_training_stop = True


cfg = ModelConfig(preset="tiny", hidden_size=32, intermediate_size=64)
tokenizer = build_tokenizer(cfg)
model = build_model(cfg, tokenizer)
model.train()
args = GRPOConfig(
    output_dir=out, use_cpu=True, per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
    max_steps=int(max_steps), logging_steps=1, eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=4,
    save_strategy="no", report_to=[], learning_rate=1e-3, seed=0, disable_tqdm=True, dataloader_num_workers=0,
)
scalerl = ScalerlCallback("grpo-preempted", url=url, token=token, compute="tokens", warn_after_steps=1)
trainer = GRPOTrainer(
    model=model, processing_class=tokenizer, reward_funcs=reward_has_digit, args=args,
    train_dataset=Dataset.from_dict({"prompt": PROMPTS * 8}),
    eval_dataset=Dataset.from_dict({"prompt": PROMPTS[:4]}), callbacks=[scalerl, SaveOnSigterm()],
)
trainer.train(resume_from_checkpoint=None if mode == "fresh" else mode)
print("ended", trainer.state.global_step, scalerl.reporter.run_id, flush=True)
"""


def _trainer(service: Service, tmp_path: Path, mode: str, max_steps: int) -> subprocess.Popen[str]:
    script = tmp_path / "grpo.py"
    script.write_text(TRAINER)
    return subprocess.Popen(
        [sys.executable, str(script), service.url, service.token, str(tmp_path / "out"), mode, str(max_steps)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false"),
    )


def _ended(out: str) -> tuple[int, int]:
    line = next(line for line in out.splitlines() if line.startswith("ended "))
    step, run_id = line.split()[1:]
    return int(step), int(run_id)


@pytest.mark.process
@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_stops_the_run_and_a_resume_continues_it(service: Service, tmp_path: Path) -> None:
    proc = _trainer(service, tmp_path, "fresh", max_steps=200)
    assert proc.stdout is not None
    for line in proc.stdout:  # SIGTERM once three optimizer steps (and the evaluation at step 2) are done
        if line.startswith("step ") and int(line.split()[1]) >= 3:
            break
    proc.send_signal(signal.SIGTERM)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    stopped_at, run_id = _ended(rest)
    assert 3 <= stopped_at < 200
    ckpt = tmp_path / "out" / f"checkpoint-{stopped_at}"
    assert (ckpt / "trainer_state.json").is_file() and any(ckpt.glob("model*.safetensors"))
    with service.http() as http:
        run = http.get(f"/api/v1/runs/{run_id}").json()
        points = http.get(f"/api/v1/runs/{run_id}/metrics").json()
    assert run["status"] == "stopped", run["status_reason"]
    assert run["status_reason"] == f"the trainer ended after SIGTERM at step {stopped_at} (checkpoint saved)"
    assert [p["step"] for p in points] == list(range(1, stopped_at + 1))
    assert any(p["pass_rate"] is not None for p in points)

    resumed = _trainer(service, tmp_path, str(ckpt), max_steps=stopped_at + 2)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err[-3000:]
    assert _ended(out) == (stopped_at + 2, run_id)  # the same run, continued
    assert "no evaluation" not in err, err[-3000:]
    with service.http() as http:
        run = http.get(f"/api/v1/runs/{run_id}").json()
        points = http.get(f"/api/v1/runs/{run_id}/metrics").json()
    assert run["status"] == "succeeded", run["status_reason"]
    assert [p["step"] for p in points] == list(range(1, stopped_at + 3))


class _Reporter:
    run_id = 1
    should_stop = False

    def log(self, *args: Any, **kwargs: Any) -> str:
        return "continue"

    def wait_for_run(self, timeout: float) -> int:
        return 1


def _no_evaluation_warnings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path, history: list[dict[str, Any]]
) -> list[str]:
    """A callback resumed at step 60 (warn_after_steps=5) logs 5 training steps without an evaluation."""
    monkeypatch.setattr(Reporter, "start", staticmethod(lambda name, **kwargs: _Reporter()))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True)
    state, control = TrainerState(global_step=60, log_history=history), TrainerControl()
    cb = ScalerlCallback("resumed", compute="tokens", warn_after_steps=5)
    cb.on_train_begin(args, state, control)
    with caplog.at_level(logging.WARNING, logger="scalerl.integrations.trl"):
        for step in range(61, 66):
            state.global_step = step
            cb.on_log(args, state, control, logs={"loss": 0.5, "reward": 0.2})
    return [r.getMessage() for r in caplog.records if "no evaluation" in r.getMessage()]


def test_a_resume_counts_the_evaluations_before_its_checkpoint(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    evaluated = [{"loss": 0.9, "step": 49}, {"eval_reward": 0.25, "step": 50}, {"loss": 0.8, "step": 60}]
    assert not _no_evaluation_warnings(monkeypatch, caplog, tmp_path, evaluated)


def test_a_resume_without_any_evaluation_is_still_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # An eval_reward outside [0, 1] is not a pass rate either.
    never = [{"loss": 0.9, "step": 50}, {"eval_reward": 3.5, "step": 50}]
    warnings = _no_evaluation_warnings(monkeypatch, caplog, tmp_path, never)
    assert len(warnings) == 1 and "61 steps" in warnings[0]
