"""The log readers on real files: TensorBoard event files written by torch's SummaryWriter (what TRL and verl
use), MLflow folders written by mlflow's own client, JSONL written by the engine's sink, a W&B run-history CSV
export, and verl console logs shaped exactly like the reference logs in ../shared/curves/SOURCES.md (Ray prefixes,
ANSI colours, the two-line initial-validation print, progress bars, 3-decimal values)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rl_core.contracts.points import MetricPoint
from rl_core.engine.sinks import JsonlSink
from scalerl.integrations.readers import choose_columns, columns_of, read_any, to_points, write_fit_csv

# verl-data gsm8k/deepseek-llm-7b-chat-megatron PPO (SOURCES.md): critic/score/mean of steps 1..10, validation
# at 0, 5, 10 and the estimated cumulative response tokens (batch 256).
TRAIN = [0.271, 0.392, 0.527, 0.611, 0.715, 0.682, 0.764, 0.735, 0.761, 0.782]
VAL = {0: 0.31311599696739956, 5: 0.622, 10: 0.657}
CUM_TOKENS = [0, 49349, 96751, 142107, 185732, 227822, 269765, 309401, 349955, 389240, 428531]
RAY = "\x1b[36m(main_task pid=5487)\x1b[0m "


def verl_console_log(steps: int = 10) -> str:
    lines = [
        f"{RAY}validation generation end",
        "(TaskRunner pid=285358) [ground_truth] 18",
        "(TaskRunner pid=285358) [score] 0.0",
        "(TaskRunner pid=285358) (\"Initial validation metrics: {'val/test_score/openai/gsm8k': \"",
        f"(TaskRunner pid=285358)  '{VAL[0]}}}')",
        f"(TaskRunner pid=285358) step:0 - val/test_score/openai/gsm8k:{VAL[0]:.3f}",
        "(WorkerDict pid=295552) logits = logits[:totol_nnz], shape: torch.Size([1374, 16128])",
    ]
    for s in range(1, steps + 1):
        resp = (CUM_TOKENS[s] - CUM_TOKENS[s - 1]) / 256
        parts = [
            f"step:{s}",
            "global_seqlen/min:329312.000",
            "actor/pg_loss:-0.052",
            "actor/lr:1e-06",
            f"critic/score/mean:{TRAIN[s - 1]:.3f}",
            f"response_length/mean:{resp:.3f}",
            "timing_s/step:58.500",
        ]
        if s in VAL:
            parts.append(f"val/test_score/openai/gsm8k:{VAL[s]:.3f}")
        lines.append(f"Training Progress:  {s}%|          | {s}/105 [00:49<1:53:43, 49.09s/it]")
        lines.append(RAY + " - ".join(parts))
        lines.append("(WorkerDict pid=295552) /usr/local/lib/python3.11/dist-packages/torch/autograd/graph.py:768: W")
    return "\n".join(lines) + "\n"


def test_verl_console_log(tmp_path: Path) -> None:
    log = tmp_path / "deepseek-llm-7b-chat-megatron.log"
    log.write_text(verl_console_log())
    (name, history), = read_any(log).items()  # fmt: skip
    assert name == log.stem and sorted(history) == list(range(11))
    assert history[0] == {"val/test_score/openai/gsm8k": 0.313}  # step 0: the initial validation only
    assert history[3]["actor/lr"] == 1e-06 and history[3]["critic/score/mean"] == 0.527

    cols = choose_columns(columns_of(history), x_per_step="response_length/mean", gpus=256)
    assert cols.pass_rate == "val/test_score/openai/gsm8k"
    points, bad = to_points(history, cols)
    assert bad == 0 and [p.step for p in points if p.pass_rate is not None] == [0, 5, 10]
    assert [p.pass_rate for p in points if p.pass_rate is not None] == [0.313, 0.622, 0.657]
    for p in points:  # the SOURCES.md compute proxy: sum of response_length/mean x 256
        assert p.compute == pytest.approx(CUM_TOKENS[p.step], abs=1.0)

    auto = choose_columns(columns_of(history), gpus=8)  # timing_s/step -> GPU-hours
    assert (auto.x, auto.per_step, auto.unit) == ("timing_s/step", True, "gpu_hours")
    points, _ = to_points(history, auto)
    assert points[-1].compute == pytest.approx(10 * 58.5 * 8 / 3600)


def test_tensorboard_event_files_from_summarywriter(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path / "tensorboard"
    for run, shift in (("q3b_fsdp_base", 0.0), ("q3b_mcore_base", 0.01)):  # verl's tensorboard/<run>/ layout
        w = SummaryWriter(str(root / run))
        for step in range(0, 11):
            if step % 5 == 0:
                w.add_scalar("val-core/openai/gsm8k/reward/mean@1", 0.567 + 0.03 * step + shift, step)
            if step > 0:
                w.add_scalar("critic/score/mean", 0.56 + 0.02 * step, step)
                w.add_scalar("perf/total_num_tokens", 1_950_000.0, step)
                w.add_scalar("perf/time_per_step", 600.0, step)
        w.close()
    runs = read_any(root)
    assert sorted(runs) == ["q3b_fsdp_base", "q3b_mcore_base"]
    history = runs["q3b_fsdp_base"]
    cols = choose_columns(columns_of(history), gpus=8)
    assert cols.pass_rate == "val-core/openai/gsm8k/reward/mean@1" and cols.x == "perf/time_per_step"
    points, _ = to_points(history, cols)
    rated = [(p.step, round(p.pass_rate, 4)) for p in points if p.pass_rate is not None]
    assert rated == [(0, 0.567), (5, 0.717), (10, 0.867)]
    assert points[-1].compute == pytest.approx(10 * 600 * 8 / 3600)
    tokens = choose_columns(columns_of(history), x_per_step="perf/total_num_tokens")
    assert to_points(history, tokens)[0][-1].compute == pytest.approx(19_500_000)


def test_mlflow_folder_written_by_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    client = MlflowClient(tracking_uri=store.resolve().as_uri())
    exp = client.create_experiment("grpo-sweep")
    for lr in ("1e-6", "3e-6"):
        run = client.create_run(exp, run_name=f"lr={lr}")
        for step in range(6):
            client.log_metric(run.info.run_id, "train/loss", 1.0 / (step + 1), step=step)
            if step % 2 == 0:
                client.log_metric(run.info.run_id, "eval/accuracy", 0.1 + 0.05 * step, step=step)
        client.set_terminated(run.info.run_id)
    runs = read_any(store)
    assert sorted(runs) == ["lr=1e-6", "lr=3e-6"]
    history = runs["lr=1e-6"]
    cols = choose_columns(columns_of(history))
    assert cols.pass_rate == "eval/accuracy" and cols.x is None  # no compute column: the step
    points, _ = to_points(history, cols)
    assert [(p.step, round(p.pass_rate, 6)) for p in points if p.pass_rate is not None] == [
        (0, 0.1),
        (2, 0.2),
        (4, 0.3),
    ]


def test_engine_jsonl_and_wandb_csv_export(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "metrics.jsonl")
    for s in range(4):
        rate = 0.2 + 0.1 * s if s % 2 == 0 else None
        sink.write(MetricPoint(step=s, compute=0.5 * s, pass_rate=rate, metrics={"train/loss": 1.0 - 0.1 * s}))
    sink.close("succeeded", "done")
    (_, history), = read_any(tmp_path / "metrics.jsonl").items()  # fmt: skip
    cols = choose_columns(columns_of(history))
    assert (cols.pass_rate, cols.x) == ("pass_rate", "compute")
    points, _ = to_points(history, cols)
    assert [(p.step, p.compute, p.pass_rate) for p in points] == [(0, 0.0, 0.2), (1, 0.5, None), (2, 1.0, 0.4),
                                                                   (3, 1.5, None)]  # fmt: skip
    assert points[1].metrics["train/loss"] == 0.9

    export = tmp_path / "wandb_export.csv"  # the run-history CSV W&B exports: _step, _runtime, blanks
    with export.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["_step", "_runtime", "_timestamp", "train/loss", "eval/accuracy", "eval/accuracy__MIN"])
        for s in range(6):
            acc = f"{0.1 + 0.1 * s:.2f}" if s % 3 == 0 else ""
            w.writerow([s, 10.5 * s, 1.7e9 + s, 1.0 / (s + 1), acc, acc])
    (_, history), = read_any(export).items()  # fmt: skip
    assert "eval/accuracy__MIN" not in columns_of(history)
    cols = choose_columns(columns_of(history))
    assert cols.pass_rate == "eval/accuracy"
    points, _ = to_points(history, cols)
    assert [(p.step, round(p.pass_rate, 6)) for p in points if p.pass_rate is not None] == [(0, 0.1), (3, 0.4)]
    out = tmp_path / "fit.csv"
    assert write_fit_csv(out, points, cols.unit) == 2
    assert out.read_text().splitlines()[0] == "step,compute,pass_rate"
