"""ScalerlCallback end to end: a real TRL GRPOTrainer (a tiny Llama built from a config, the character tokenizer,
CPU, no downloads) reporting to a live embedded service; a stop requested on the service ends training at the next
step with a checkpoint on disk, and the run is reported stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.conftest import Service
from tests.services import unavailable

try:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from scalerl.integrations.trl import ScalerlCallback
except ImportError as exc:  # pragma: no cover - the integrations extra is part of CI's install
    unavailable(f"trl/transformers not installed (pip install 'scalerl[integrations]'): {exc}")

from rl_core.models import ModelConfig, build_model, build_tokenizer

PROMPTS = ["1+1=", "2+2=", "3+1=", "1+2=", "2+3=", "4+1=", "3+3=", "0+2="]


def reward_has_digit(completions: list[str], **_: Any) -> list[float]:
    """A 0/1 reward, so the evaluation's mean reward is a pass rate."""
    return [1.0 if any(c.isdigit() for c in text[:3]) else 0.0 for text in completions]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_trainer(out: Path, callbacks: list[Any], max_steps: int) -> GRPOTrainer:
    cfg = ModelConfig(preset="tiny", hidden_size=32, intermediate_size=64)
    tokenizer = build_tokenizer(cfg)
    model = build_model(cfg, tokenizer)
    model.train()
    data = Dataset.from_dict({"prompt": PROMPTS * 8})
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        max_steps=max_steps,
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=2,
        per_device_eval_batch_size=4,
        save_strategy="no",
        report_to=[],
        learning_rate=1e-3,
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward_has_digit,
        args=args,
        train_dataset=data,
        eval_dataset=Dataset.from_dict({"prompt": PROMPTS[:4]}),
        callbacks=callbacks,
    )


class StopFromOutside(TrainerCallback):  # type: ignore[misc]
    """Plays the user (or auto_stop) pressing stop on the service once the run reached ``at_step``."""

    def __init__(self, service: Service, scalerl: ScalerlCallback, at_step: int) -> None:
        self.service, self.scalerl, self.at_step = service, scalerl, at_step
        self.requested_at: int | None = None
        self.requested_time: float | None = None
        self.ended_time: float | None = None

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.ended_time = time.monotonic()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        rep = self.scalerl.reporter
        running = rep is not None and rep.run_id is not None and rep.status == "running"  # a queued one stops at once
        if self.requested_at is None and state.global_step >= self.at_step and running and rep is not None:
            with self.service.http() as http:
                assert http.post(f"/api/v1/runs/{rep.run_id}/stop", json={"reason": "test"}).status_code == 200
            self.requested_at = state.global_step
            self.requested_time = time.monotonic()
        if self.requested_at is not None:
            time.sleep(0.05)  # steps take ~0.1 s here; give the reporter's poll a chance between steps


def test_service_stop_ends_grpo_training_with_a_checkpoint(service: Service, tmp_path: Path) -> None:
    # The reporter's default settings (this test set poll_interval=0.1, which hid a 30 s stop latency).
    cb = ScalerlCallback("grpo-tiny", url=service.url, token=service.token, budget=1.0)
    stopper = StopFromOutside(service, cb, at_step=4)
    trainer = make_trainer(tmp_path / "out", [cb, stopper], max_steps=200)
    trainer.train()

    stopped_at = trainer.state.global_step
    assert stopper.requested_at is not None and cb.stopped_by_service
    assert stopper.requested_at <= stopped_at < 200, "the stop must end training long before max_steps"
    assert stopper.requested_time is not None and stopper.ended_time is not None
    # within flush_interval (2 s) plus one step, plus the checkpoint the stop writes (a margin for a loaded machine)
    assert stopper.ended_time - stopper.requested_time < 2.0 + 3.0, stopper.ended_time - stopper.requested_time
    ckpt = tmp_path / "out" / f"checkpoint-{stopped_at}"
    assert ckpt.is_dir() and any(ckpt.glob("model*.safetensors")) and (ckpt / "trainer_state.json").is_file()

    with service.http() as http:
        run = http.get(f"/api/v1/runs/{cb.reporter.run_id}").json()  # type: ignore[union-attr]
        points = http.get(f"/api/v1/runs/{run['id']}/metrics").json()
    assert run["name"] == "grpo-tiny" and run["status"] == "stopped"
    assert any("stopped by the service" in t["reason"] for t in run["transitions"])
    steps = [p["step"] for p in points]
    assert steps == sorted(set(steps)) and steps[-1] == stopped_at
    evals = [p for p in points if p["pass_rate"] is not None]
    assert evals and all(p["step"] % 2 == 0 for p in evals)  # eval_reward at the eval steps
    assert all("loss" in p["metrics"] and "reward" in p["metrics"] for p in points)
    assert all("eval_reward" in p["metrics"] for p in evals)  # train and eval of one step: one point
    computes = [p["compute"] for p in points]
    assert computes == sorted(computes) and computes[-1] > 0  # GPU-hours from wall time x devices


def test_callback_reports_tokens_and_success(service: Service, tmp_path: Path) -> None:
    cb = ScalerlCallback(
        "grpo-tokens",
        url=service.url,
        token=service.token,
        compute="tokens",
        metrics=["loss", "reward", "eval_reward"],
        reporter_options={"flush_interval": 0.05},
    )
    trainer = make_trainer(tmp_path / "out", [cb], max_steps=4)
    trainer.train()
    assert trainer.state.global_step == 4 and not cb.stopped_by_service
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {service.token}"}) as http:
        run_id = cb.reporter.run_id  # type: ignore[union-attr]
        run = http.get(f"/api/v1/runs/{run_id}").json()
        points = http.get(f"/api/v1/runs/{run_id}/metrics").json()
    assert run["status"] == "succeeded"
    assert [p["step"] for p in points] == [1, 2, 3, 4]
    assert all(set(p["metrics"]) <= {"loss", "reward", "eval_reward"} for p in points)
    tokens = [p["compute"] for p in points]
    assert tokens[0] > 0 and tokens == sorted(tokens) and len(set(tokens)) == 4  # TRL's cumulative num_tokens


def test_gpu_hours_continue_across_a_resume_from_checkpoint(service: Service, tmp_path: Path) -> None:
    """A trainer resumed from a checkpoint restarts its wall clock; the GPU-hours it reports must continue from the
    compute the service stored at the checkpoint's step, or the run's curve folds back on itself."""
    options = {"flush_interval": 0.05, "poll_interval": 0.1, "backoff": 0.05}
    first = ScalerlCallback("grpo-resume", url=service.url, token=service.token, reporter_options=options)
    stopper = StopFromOutside(service, first, at_step=4)
    trainer = make_trainer(tmp_path / "out", [first, stopper], max_steps=60)
    trainer.train()
    ckpt_step = trainer.state.global_step
    run_id = first.reporter.run_id  # type: ignore[union-attr]
    with service.http() as http:
        assert http.post(f"/api/v1/runs/{run_id}/resume", json={"reason": "test"}).status_code == 200
        before = http.get(f"/api/v1/runs/{run_id}/metrics").json()
    at_ckpt = max((p for p in before if p["step"] <= ckpt_step), key=lambda p: p["step"])["compute"]
    time.sleep(0.2)  # the new process's clock starts later than the first one's ended

    second = ScalerlCallback("grpo-resume", url=service.url, token=service.token, reporter_options=options)
    resumed = make_trainer(tmp_path / "out", [second], max_steps=ckpt_step + 3)
    resumed.train(resume_from_checkpoint=str(tmp_path / "out" / f"checkpoint-{ckpt_step}"))
    assert resumed.state.global_step == ckpt_step + 3
    with service.http() as http:
        points = http.get(f"/api/v1/runs/{run_id}/metrics").json()
    after = [p for p in points if p["step"] > ckpt_step]
    assert [p["step"] for p in after][-1] == ckpt_step + 3
    assert all(p["compute"] > at_ckpt for p in after), (at_ckpt, [(p["step"], p["compute"]) for p in after])
    computes = [p["compute"] for p in sorted(points, key=lambda p: p["step"])]
    assert computes == sorted(computes)


def test_gpu_hours_leave_out_evaluation_time(service: Service, tmp_path: Path) -> None:
    """Evaluation is not training compute. Two evaluations made 2.5 s slower each must not add
    5 s to the run's compute."""
    cb = ScalerlCallback("grpo-eval-time", url=service.url, token=service.token, devices=1)
    trainer = make_trainer(tmp_path / "out", [cb], max_steps=4)  # evaluates at steps 2 and 4
    evaluate = trainer.evaluate
    slow_seconds = 2.5

    def slow_evaluate(*args: Any, **kwargs: Any) -> Any:
        time.sleep(slow_seconds)
        return evaluate(*args, **kwargs)

    trainer.evaluate = slow_evaluate  # type: ignore[method-assign]
    started = time.monotonic()
    trainer.train()
    wall = time.monotonic() - started
    with service.http() as http:
        points = http.get(f"/api/v1/runs/{cb.reporter.run_id}/metrics").json()  # type: ignore[union-attr]
    compute_seconds = max(p["compute"] for p in points) * 3600.0
    assert compute_seconds > 0
    assert compute_seconds < wall - 2 * slow_seconds + 0.5, (compute_seconds, wall)


def test_callback_joins_an_experiment_by_name_in_its_compute_unit(service: Service, tmp_path: Path) -> None:
    """`ScalerlCallback(experiment=NAME)` creates it on first use, in the unit it reports."""
    assert ScalerlCallback("a", experiment="x").registration["compute_unit"] == "gpu_hours"
    assert ScalerlCallback("a", experiment="x", compute="tokens").registration["compute_unit"] == "tokens"
    with pytest.raises(ValueError):
        ScalerlCallback("a", experiment="x", experiment_id=1)
    cb = ScalerlCallback(
        "grpo-named", url=service.url, token=service.token, experiment="trl-sweep", compute="tokens",
        reporter_options={"flush_interval": 0.05},
    )  # fmt: skip
    make_trainer(tmp_path / "out", [cb], max_steps=2).train()
    with service.http() as http:
        exps = {e["name"]: e for e in http.get("/api/v1/experiments").json()}
    assert exps["trl-sweep"]["document"]["compute_unit"] == "tokens"
    assert exps["trl-sweep"]["status_counts"] == {"succeeded": 1}
