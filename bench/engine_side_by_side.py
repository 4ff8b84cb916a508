"""A side-by-side: scalerl's engine (PipelineRL k=8 and sync) and TRL's GRPOTrainer at one configuration,
with the physical limit of a step printed next to each row.

Default configuration: random-init ``qwen2-0.5b`` preset with the character tokenizer, synthetic
addition, 32 prompts x 8 generations = 256 rows per step, response cap 256 (a random model runs every row to the
cap), trainer micro-batch 32 rows, bf16 compute with the FP32 head (scalerl's recipe), first step excluded.
TRL runs with its own defaults (HF ``generate``, Accelerate bf16 mixed precision) at the same model, batch
(per-device 32 x gradient accumulation 8 = 256 completions, 8 per prompt) and response cap, CISPO loss like scalerl.

Physical limit of a step (on the measured ceilings of this device: an n^3 matmul in the compute dtype, a large
device-to-device copy): trainer FLOPs (3 x 2 x matmul parameters x tokens of the step) over the matmul peak, plus
for every decode step the larger of its FLOPs over the peak and its bytes (weights once, the KV cache so far)
over the copy bandwidth. Printed as seconds per step and as the multiple of it each system takes.

    python bench/engine_side_by_side.py --json side.json              # cuda if there is one
    python bench/engine_side_by_side.py --smoke                       # tiny CPU sizes, every code path, < 2 min
    python bench/engine_side_by_side.py --generator-device cuda:1     # the generator on its own GPU (2 GPUs)

The head is the FP32-accurate tensor-core head (``--head bf16x6``) unless ``--head`` says otherwise. On one
GPU shared by trainer and generator the engine runs PipelineRL-8 as sync (``rl_core/engine/schedule.py``); the
table's last column says which schedule each scalerl row really ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_args import int_flags
from gpu import addition_run, copy_bandwidth, free_port, matmul_peak, short_length, sync

#: torch's own thread count on this machine (all cores): what TRL runs with at its defaults.
DEFAULT_THREADS = torch.get_num_threads()


def engine_config(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """The scalerl recipe at the side-by-side's sizes; zero-variance filtering off (a random model solves nothing,
    so the filter would drop every group; kept, they cost a full forward/backward, which is what a step costs).
    ``mode`` ``pipeline``/``sync``; a ``-padded`` suffix turns the trainer's length buckets off (one padded batch per
    micro-batch: the engine before them, for the before/after in one run)."""
    padded = mode.endswith("-padded")
    mode = mode.removesuffix("-padded")
    r = args.response
    return {
        "name": f"side-by-side-{mode}",
        "seed": 0,
        "device": args.device,
        "threads": args.threads,
        "recipe": {
            "preset": "scalerl",
            "batch": {"prompts": args.prompts, "generations": args.generations},
            "pipeline": {"mode": "pipeline", "k": 8} if mode == "pipeline" else {"mode": "sync"},
            "filters": {"zero_variance": "none"},
            "precision": {
                "generator_dtype": args.dtype,
                "trainer_dtype": args.dtype,
                "lm_head_operands": args.head,
            },
            "length": short_length(r),
        },
        **addition_run(args.preset, args.steps),
        "trainer": {"micro_batch_size": args.micro, "length_buckets": not padded},
        "generator": {
            "max_new_tokens": r,
            "decode": args.decode,
            "compile": args.compile,
            "device": args.generator_device,
        },
        "sinks": {"console": False, "csv": False},
    }


def run_engine(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """Steps 2..N-1 of the real engine (the first pays the start-up and compilation, the last the final eval)."""
    from rl_core.contracts.points import read_points
    from rl_core.contracts.run_config import parse_run_config
    from rl_core.engine.admission import AdmissionPolicy
    from rl_core.engine.runner import run
    from rl_core.engine.schedule import choose_schedule, torch_threads

    cfg = parse_run_config(engine_config(args, mode))
    schedule = choose_schedule(AdmissionPolicy.from_config(cfg.recipe.pipeline), cfg.device, cfg.generator_devices())
    out = Path(tempfile.mkdtemp(prefix=f"side-{mode}-"))
    try:
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        result = run(cfg, out / "run")
        if result.status != "succeeded":
            raise RuntimeError(f"engine run {result.status}: {result.reason}")
        points = [p for p in read_points(out / "run" / "metrics.jsonl") if p.step >= 1]
        window = [p for p in points if 2 <= p.step <= args.steps - 1] or points[1:]
        seconds = window[-1].wall_time - points[0].wall_time
        sampled = sum(p.metrics["train/samples"] * p.metrics["train/response_length_mean"] for p in window)
        mem = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else float("nan")
        return {
            "step_s": seconds / len(window),
            "tokens_s": sampled / seconds,
            "tokens_per_step": sampled / len(window),
            "trainer_step_s": sum(p.metrics.get("train/step_seconds", 0.0) for p in window) / len(window),
            "gen_busy_s": sum(p.metrics.get("gen/busy_seconds", 0.0) for p in window) / len(window),
            "trainer_peak_gib": mem,
            "steps_timed": len(window),
            "threads": torch_threads(args.threads, schedule.used.mode, 1),
            "schedule_used": f"{schedule.used.mode} k={schedule.used.k}",  # sync on a GPU shared with the generator
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_trl(args: argparse.Namespace) -> dict[str, Any]:
    """TRL's GRPOTrainer at its defaults: one process with torch's own thread count (every core), HF generate."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rl_core.models import ModelConfig, build_model, build_tokenizer
    from rl_core.tasks import build_task

    torch.set_num_threads(DEFAULT_THREADS)
    cfg = ModelConfig(preset=args.preset)
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, args.device, dtype="float32")
    task = build_task({"kind": "synthetic-addition", "digits_max": 3})
    problems = list(task.problems("train"))
    by_prompt = {p.prompt: p for p in problems}
    data = Dataset.from_list([{"prompt": p.prompt} for p in problems])

    def reward(prompts: list[str], completions: list[str], **_: Any) -> list[float]:
        return [task.reward(by_prompt[p], c) for p, c in zip(prompts, completions, strict=True)]

    marks: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            sync(torch.device(args.device))
            marks.append(time.perf_counter())

        def on_log(self, a: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

    rows = args.prompts * args.generations
    accum = max(1, rows // args.micro)
    # TRL's config (accelerate) may start a one-process torch.distributed group: it must not inherit another
    # launcher's rank variables or a port that process still holds (EADDRINUSE in the full test suite).
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        os.environ.pop(var, None)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    conf = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="side-trl-"),
        per_device_train_batch_size=args.micro,
        gradient_accumulation_steps=accum,
        num_generations=args.generations,
        max_completion_length=args.response,
        max_steps=args.steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not args.device.startswith("cuda"),
        bf16=args.dtype == "bfloat16" and args.device.startswith("cuda"),
        loss_type="cispo",
        epsilon_high=5.0,
        beta=0.0,
        seed=0,
        dataloader_num_workers=0,
    )
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=conf, train_dataset=data, processing_class=tok)
    trainer.add_callback(Clock())
    trainer.train()
    timed = marks[1:]  # first step excluded
    seconds = timed[-1] - marks[0]
    mean_len = sum(lengths[1:]) / max(1, len(lengths[1:])) if len(lengths) > 1 else float(args.response)
    mem = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else float("nan")
    return {
        "step_s": seconds / len(timed),
        "tokens_s": rows * mean_len / (seconds / len(timed)),
        "tokens_per_step": rows * mean_len,
        "trainer_peak_gib": mem,
        "steps_timed": len(timed),
        "threads": DEFAULT_THREADS,
    }


def step_limit(args: argparse.Namespace, tokens_per_step: float, peak: float, bw: float) -> float:
    """Seconds of the physical limit for one step with ``tokens_per_step`` sampled tokens (module doc)."""
    from rl_core.generation import matmul_params
    from rl_core.models import ModelConfig, build_hf_config, build_tokenizer

    cfg = ModelConfig(preset=args.preset)
    hf = build_hf_config(cfg, build_tokenizer(cfg))
    mm = float(matmul_params(hf))
    rows = args.prompts * args.generations
    resp = tokens_per_step / rows
    prompt = 16.0  # synthetic addition prompts: ~10-20 characters
    elt = 2 if args.dtype in ("bfloat16", "float16") else 4
    trainer = 6.0 * mm * rows * (prompt + resp) / peak
    layers, kvh = hf.num_hidden_layers, hf.num_key_value_heads
    kv_per_token = 2 * layers * kvh * (hf.hidden_size // hf.num_attention_heads) * elt
    decode = 0.0
    for t in range(int(resp)):
        flops = 2.0 * mm * rows
        nbytes = mm * elt + rows * (prompt + t) * kv_per_token
        decode += max(flops / peak, nbytes / bw)
    return trainer + decode


def _trl_in_own_process() -> dict[str, Any]:
    """The TRL row run by this script in a new process with the same arguments (``--systems trl``)."""
    import subprocess

    argv = list(sys.argv[1:])
    for flag in ("--systems", "--json"):
        if flag in argv:
            i = argv.index(flag)
            del argv[i : i + 2]
    out = Path(tempfile.mkdtemp(prefix="side-trl-")) / "trl.json"
    subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *argv, "--systems", "trl", "--json", str(out)], check=True
    )
    row: dict[str, Any] = json.loads(out.read_text())["results"]["trl"]
    if "error" in row:
        raise RuntimeError(row["error"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset", default="qwen2-0.5b")
    int_flags(ap, prompts=32, generations=8, response=256, micro=32, steps=5)
    ap.add_argument("--dtype", default=None, help="bfloat16 on cuda, float32 on cpu by default")
    ap.add_argument(
        "--threads",
        type=lambda v: v if v == "auto" else int(v),
        default="auto",
        help="the engine's threads per process (auto: every core for sync, split between the processes otherwise)",
    )
    ap.add_argument("--decode", default="auto", help="generator.decode for scalerl")
    ap.add_argument("--compile", default="auto", help="generator.compile for scalerl")
    ap.add_argument("--systems", default="pipeline,sync,trl")
    ap.add_argument("--head", default="bf16x6", help="precision.lm_head_operands (bf16x6: FP32-accurate, tensor cores)")
    ap.add_argument("--generator-device", default=None, help="generator.device (e.g. cuda:1; default: colocated)")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU sizes (tests the code paths)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.device, args.preset, args.prompts, args.generations = "cpu", "tiny", 4, 2
        args.response, args.micro, args.steps = 16, 4, 3
    args.dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    torch.set_num_threads(DEFAULT_THREADS if args.threads == "auto" else args.threads)
    device = torch.device(args.device)
    dt = getattr(torch, args.dtype)
    peak = matmul_peak(device, dt, 8192 if device.type == "cuda" else 512, reps=10) * 1e12  # FLOP/s
    bw = copy_bandwidth(device, 2048 if device.type == "cuda" else 128) * 1e9  # bytes/s
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"# {name}: matmul {peak / 1e12:.0f} TFLOP/s ({args.dtype}), copy {bw / 1e9:.0f} GB/s", flush=True)
    results: dict[str, dict[str, Any]] = {}
    labels = {
        "pipeline": "scalerl PipelineRL-8",
        "sync": "scalerl sync",
        "pipeline-padded": "scalerl PipelineRL-8, no length buckets",
        "sync-padded": "scalerl sync, no length buckets",
        "trl": "TRL GRPOTrainer (defaults)",
    }
    systems = args.systems.split(",")
    for system in systems:
        try:
            if system == "trl" and len(systems) > 1:
                r = _trl_in_own_process()  # a clean process: the engine's runs leave torch.distributed state
            else:
                r = run_trl(args) if system == "trl" else run_engine(args, system)
        except Exception as exc:  # one failing system still leaves the others' rows
            results[system] = {"error": f"{type(exc).__name__}: {exc}"[:800]}
            print(f"{system}: failed: {results[system]['error']}", flush=True)
            continue
        r["limit_s"] = step_limit(args, r["tokens_per_step"], peak, bw)
        results[system] = r
        print(f"{system}: {json.dumps(r)}", flush=True)
    if args.json:
        meta = {
            "device": name,
            "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "matmul_peak": peak,
            "copy_bandwidth": bw,
            "args": vars(args),
        }
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"\n{name}, {args.preset}, {args.prompts}x{args.generations} rows, cap {args.response}, {args.dtype}")
    rows = args.prompts * args.generations
    trl = results.get("trl", {})
    print(
        "| system | threads/process | s/step | samples/s | × TRL samples/s | sampled tokens/s | limit s/step | × limit "
        "| peak GiB | schedule run |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for system, r in results.items():
        if "error" in r:
            print(f"| {labels.get(system, system)} | | failed | {r['error'][:80]} | | | | | | |")
            continue
        versus = f"{trl['step_s'] / r['step_s']:.2f}×" if "step_s" in trl else ""
        print(
            f"| {labels.get(system, system)} | {r.get('threads', '')} | {r['step_s']:.2f} | {rows / r['step_s']:.0f} | "
            f"{versus} | {r['tokens_s']:,.0f} | {r['limit_s']:.3f} | {r['step_s'] / r['limit_s']:.1f}× | "
            f"{r['trainer_peak_gib']:.1f} | {r.get('schedule_used', '')} |"
        )


if __name__ == "__main__":
    main()
