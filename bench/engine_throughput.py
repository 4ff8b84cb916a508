"""RL throughput on this machine: scalerl's engine (pipeline k=8 and sync) side by side with TRL's GRPOTrainer.

Same tiny model (the demo's warmed-up base checkpoint), same task and prompts, same batch (16 prompts × 8
generations = 128 samples per optimiser step), same response cap (48 tokens), float32, one torch thread per
process, CPU. Each system trains for a fixed number of steps; throughput is measured after a warm-up step:

    samples/s = samples trained on in steps 2..N / wall time of those steps
    tokens/s  = response tokens of those samples / the same wall time

scalerl runs two processes (generator + trainer), TRL one (generation and training in turn), which is each
system's normal way of running. Usage: ``python bench/engine_throughput.py [--steps 30] [--skip-trl]``.
Prints a Markdown table last.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def engine_config(mode: str, k: int, steps: int) -> dict[str, Any]:
    cfg = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    cfg["recipe"]["pipeline"] = {"mode": mode, "k": k}
    cfg["budget"] = {"steps": steps}
    cfg["eval"] = {"every": 10**6, "k": 1, "prompts": 1}
    cfg["checkpoint"] = {"every": 10**6}
    cfg["sinks"] = {"console": False, "csv": False}
    return cfg


def run_engine(mode: str, k: int, steps: int) -> dict[str, float]:
    from rl_core.contracts.points import read_points
    from rl_core.contracts.run_config import parse_run_config
    from rl_core.engine.runner import run

    out = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-"))
    try:
        result = run(parse_run_config(engine_config(mode, k, steps)), out / "run")
        assert result.status == "succeeded", result.reason
        points = read_points(out / "run" / "metrics.jsonl")
        window = [p for p in points if p.step >= 2]
        seconds = window[-1].wall_time - points[1].wall_time
        samples = sum(p.metrics["train/samples"] for p in window)
        tokens = sum(p.metrics["train/samples"] * p.metrics["train/response_length_mean"] for p in window)
        return {
            "samples_per_s": samples / seconds,
            "tokens_per_s": tokens / seconds,
            "seconds": seconds,
            "pass_rate": float(window[-1].metrics.get("train/pass_rate", float("nan"))),
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_trl(steps: int) -> dict[str, float]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rl_core.contracts.run_config import parse_run_config
    from rl_core.engine.models import resolve_model_config
    from rl_core.recipe import CispoLoss
    from rl_core.tasks import build_task

    torch.set_num_threads(1)
    cfg = parse_run_config(engine_config("sync", 1, steps))
    path = resolve_model_config(cfg).path
    assert path is not None
    task = build_task(cfg.task)
    problems = list(task.problems("train"))
    by_prompt = {p.prompt: p for p in problems}
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": p.prompt} for p in problems])

    specials = {tok.eos_token_id, tok.pad_token_id}

    def reward(prompts: list[str], completions: list[str], completion_ids: list[list[int]], **_: Any) -> list[float]:
        # TRL decodes completions without special tokens, which drops <think>/</think>: decode the ids ourselves,
        # exactly as scalerl's generator does (keep the thinking markers, drop EOS/padding).
        texts = [tok.decode([t for t in ids if t not in specials], skip_special_tokens=False) for ids in completion_ids]
        return [task.reward(by_prompt[p], c) for p, c in zip(prompts, texts, strict=True)]

    lengths: list[float] = []
    marks: list[float] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            marks.append(time.perf_counter())

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

    rc = cfg.recipe
    if not isinstance(rc.loss, CispoLoss):
        raise SystemExit(f"the TRL side runs CISPO; the engine config's recipe uses loss.type {rc.loss.type!r}")
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        per_device_train_batch_size=rc.batch.prompts * rc.batch.generations,
        num_generations=rc.batch.generations,
        max_completion_length=cfg.generator.max_new_tokens,
        learning_rate=rc.optimizer.lr,
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        temperature=rc.sampling.temperature,
        loss_type="cispo",
        epsilon_high=rc.loss.eps_max,
        beta=0.0,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data, processing_class=tok)
    trainer.add_callback(Clock())
    trainer.train()
    seconds = marks[-1] - marks[0]
    samples = (len(marks) - 1) * rc.batch.prompts * rc.batch.generations
    mean_len = sum(lengths[1:]) / max(1, len(lengths[1:])) if lengths else float("nan")
    return {"samples_per_s": samples / seconds, "tokens_per_s": samples * mean_len / seconds, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    results["scalerl pipeline k=8"] = run_engine("pipeline", 8, args.steps)
    results["scalerl sync"] = run_engine("sync", 1, args.steps)
    if not args.skip_trl:
        results["TRL GRPOTrainer"] = run_trl(args.steps)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    base = results["scalerl sync"]["samples_per_s"]
    print("| system | samples/s | tokens/s | vs scalerl sync |")
    print("|---|---|---|---|")
    for name, r in copy.deepcopy(results).items():
        print(f"| {name} | {r['samples_per_s']:.1f} | {r['tokens_per_s']:.0f} | {r['samples_per_s'] / base:.2f}× |")


if __name__ == "__main__":
    main()
