"""Where the GPU path's time goes: ``torch.profiler`` over batch-1 decoding and one trainer step.

Two questions, one run:

1. **decode** (0.5B shape, bf16, the FP32 head, batch 1): is it launch-bound (GPU idle between kernels) or
   bandwidth-bound? Prints wall time per token, the GPU's busy time per token (sum of kernel times) and the
   kernels that take the most of it.
2. **train** (``--train-model``, default 1.5B shape): one ``TorchTrainer`` step on the ``bench/gpu.py`` batch
   (65,536 tokens, 4 rows per micro-batch), FP32 head in float32 and on bf16 operands: the kernels by self CUDA
   time, and the share of the head's matmuls.

Writes the full ``key_averages`` tables under ``--out`` and prints a short summary last. ``--smoke`` runs the same
code on the CPU with tiny models (CPU numbers, labelled so).

    PYTHONPATH=. python3 bench/gpu_profile.py --out $OUT
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from bench import gpu  # noqa: E402  (bench/gpu.py: its sizes, recipe and batch builders)
from rl_core.generation import Generator  # noqa: E402
from rl_core.models import build_model, build_tokenizer  # noqa: E402


def _activities(device: torch.device) -> list[ProfilerActivity]:
    return [ProfilerActivity.CPU, ProfilerActivity.CUDA] if device.type == "cuda" else [ProfilerActivity.CPU]


def _gpu_busy_us(averages: Any) -> float:
    """Sum of device kernel self times (microseconds) in ``prof.key_averages()``; 0 on the CPU."""
    return float(sum(e.self_device_time_total for e in averages if e.device_type.name == "CUDA"))


def _table(averages: Any, device: torch.device, rows: int) -> str:
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return str(averages.table(sort_by=key, row_limit=rows))


def _say(line: str) -> None:
    """A summary line, printed at once: a stage limit that ends the run later keeps it in the log."""
    print(line, flush=True)


def profile_decode(device: torch.device, preset: str, tokens: int, out: Path) -> dict[str, float]:
    s = gpu.FULL if device.type == "cuda" else gpu.SMOKE
    recipe = gpu.gen_recipe(s)
    cfg = gpu.model_config(preset)
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, device, dtype=recipe.precision.generator_dtype, fp32_lm_head=True)
    prompts = gpu.fixed_prompts(1, s.gen_prompt)
    Generator(model, tok, recipe, device=device, max_new_tokens=8, seed=0).generate(prompts, 1)  # warm-up
    gen = Generator(model, tok, recipe, device=device, max_new_tokens=tokens, seed=0)
    gpu.sync(device)
    with profile(activities=_activities(device)) as prof:
        t0 = time.perf_counter()
        rollouts = gen.generate(prompts, 1)
        gpu.sync(device)
        wall = time.perf_counter() - t0
    n = len(rollouts[0].response_ids)
    # One ``key_averages`` per profile: each call walks every recorded event (128 decode steps of ~1,000 kernels and
    # their host-side ops).
    averages = prof.key_averages()
    (out / "profile_decode.txt").write_text(_table(averages, device, 40))
    busy = _gpu_busy_us(averages) / 1e6
    kernels = sum(e.count for e in averages if e.device_type.name == "CUDA")
    del model, gen
    gpu.free_memory()
    return {
        "tokens": n,
        "wall_ms_per_token": 1e3 * wall / n,
        "gpu_busy_ms_per_token": 1e3 * busy / n,
        "kernels_per_token": kernels / n,
    }


def profile_train(device: torch.device, preset: str, out: Path) -> dict[str, float]:
    s = gpu.FULL if device.type == "cuda" else gpu.SMOKE
    cfg = gpu.model_config(preset)
    tok = build_tokenizer(cfg)
    summary: dict[str, float] = {}
    for operands in ("float32", "bfloat16"):
        recipe = gpu.train_recipe(operands)
        batch = gpu.synthetic_batch(recipe, len(tok), tok.pad_token_id or 0, s)
        micro = max(1, s.micro_tokens // batch.input_ids.shape[1])
        while True:  # as bench/gpu.py's run_trainer: halve the micro-batch on out-of-memory (bf16 operands at 1.5B)
            model = build_model(cfg, tok, device, dtype="float32", fp32_lm_head=True, lm_head_operands=operands)
            model.train()
            trainer: Any = None
            try:
                trainer = gpu.make_trainer("torch", model, recipe, device, micro)
                trainer.step(batch)  # warm-up
                gpu.sync(device)
                break
            except Exception as exc:
                if not gpu.is_oom(exc) or micro == 1:
                    raise
                print(f"train head operands {operands}: out of memory at {micro} rows per micro-batch; halving")
                micro //= 2
                del trainer, model
                gpu.free_memory()
        with profile(activities=_activities(device)) as prof:
            t0 = time.perf_counter()
            trainer.step(batch)
            gpu.sync(device)
            wall = time.perf_counter() - t0
        averages = prof.key_averages()
        (out / f"profile_train_{operands}.txt").write_text(_table(averages, device, 40))
        summary[f"{operands}_step_s"] = wall
        summary[f"{operands}_gpu_busy_s"] = _gpu_busy_us(averages) / 1e6
        summary[f"{operands}_tokens_s"] = float(batch.input_ids.numel()) / wall
        summary[f"{operands}_micro_rows"] = float(micro)
        _say(
            f"train {preset} head operands {operands}: {wall:.2f} s/step "
            f"({summary[f'{operands}_tokens_s']:.0f} tokens/s), GPU busy {summary[f'{operands}_gpu_busy_s']:.2f} s, "
            f"micro-batch {micro} rows"
        )
        del trainer, model
        gpu.free_memory()
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".", help="folder for the full profiler tables")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny models: checks the code paths only")
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--train-model", default="qwen2-1.5b")
    ap.add_argument("--only", default="decode,train", help="decode,train")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        device, dec_preset, train_preset, n = torch.device("cpu"), "tiny", "tiny", 8
    elif not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible: run with --smoke for the CPU check")
    else:
        device, dec_preset, train_preset, n = torch.device("cuda:0"), "qwen2-0.5b", args.train_model, args.decode_tokens
    only = {x.strip() for x in args.only.split(",")}
    _say(f"profile on {'CPU (smoke, not GPU numbers)' if args.smoke else torch.cuda.get_device_name(device)}")
    if "decode" in only:
        t0 = time.perf_counter()
        d = profile_decode(device, dec_preset, n, out)
        _say(
            f"decode {dec_preset} batch 1: {d['wall_ms_per_token']:.2f} ms/token wall, GPU busy "
            f"{d['gpu_busy_ms_per_token']:.3f} ms/token, {d['kernels_per_token']:.0f} kernels/token "
            f"({d['tokens']} tokens; {time.perf_counter() - t0:.0f} s with the model build and the profiler's work)"
        )
    if "train" in only:
        profile_train(device, train_preset, out)


if __name__ == "__main__":
    main()
