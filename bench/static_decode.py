"""Decode throughput of the generator: today's dynamic path against the static-shape decoder's modes.

Each row: one ``Generator.generate`` call of B rows after a warm-up call (compilation and graph capture happen
in the warm-up and are reported separately), random-init model of a preset, fixed prompts, responses forced to
the cap (``length.mode: none``, EOS never sampled: stop tokens are emptied), temperature 1, top-p 1. Printed:
ms per decode step, sampled tokens/s, and the bandwidth bound of one decode step (weight bytes + KV-cache bytes
read once, over the measured copy bandwidth) with the fraction reached.

    python bench/static_decode.py --device cpu --preset tiny --batch 128 --tokens 64
    python bench/static_decode.py --device cuda --preset qwen2-0.5b --batch 1,256 --tokens 128 \
        --modes dynamic,graph,inductor-graph --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu import copy_bandwidth, sync  # the device ceilings bench/gpu.py measures

from rl_core.contracts.model_config import ModelConfig
from rl_core.generation import Generator
from rl_core.models import build_model, build_tokenizer
from rl_core.recipe import Recipe, apply_overrides
from rl_core.tasks import Problem


def recipe_for(tokens: int, dtype: str) -> Recipe:
    return apply_overrides(
        Recipe(),
        {
            "length.mode": "none",
            "length.max_response_tokens": tokens,
            "length.max_prompt_tokens": 64,
            "precision.generator_dtype": dtype,
        },
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--batch", default="128", help="comma-separated batch sizes")
    ap.add_argument("--tokens", type=int, default=64, help="response tokens per row (forced to the cap)")
    ap.add_argument("--prompt", type=int, default=16, help="prompt characters")
    ap.add_argument("--modes", default="dynamic,eager,inductor")
    ap.add_argument("--dtype", default=None, help="generator dtype (default bfloat16 on cuda, float32 on cpu)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    cfg = ModelConfig(preset=args.preset)
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, device, dtype=dtype, fp32_lm_head=True)  # type: ignore[arg-type]
    params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    c = model.config
    kv_per_token = 2 * c.num_hidden_layers * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    kv_per_token *= next(model.parameters()).element_size()
    bw = copy_bandwidth(device, 1024 if device.type == "cuda" else 128) * 1e9  # bytes/s (best of 5)
    prompt = "1" * max(1, args.prompt - 1) + "="
    rows: list[dict[str, Any]] = []

    def save() -> None:  # after every row: a stage stopped by its time limit keeps what it measured
        if not args.json:
            return
        meta = {
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "preset": args.preset,
            "dtype": dtype,
            "copy_bandwidth": bw,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))

    print(f"# {args.preset} ({params / 1e6:.1f} M params, {dtype}) on {device}, copy bandwidth {bw / 1e9:.0f} GB/s")
    for b in [int(x) for x in args.batch.split(",")]:
        for mode in args.modes.split(","):
            rec = recipe_for(args.tokens, dtype)
            decode = "dynamic" if mode == "dynamic" else "static"
            gen = Generator(
                model, tok, rec, device=device, seed=0, decode=decode, compile="auto" if decode == "dynamic" else mode
            )
            gen.stop_ids = frozenset()
            gen.codec.stop_ids = frozenset()
            problems = [Problem(str(i), prompt, "") for i in range(b)]
            try:
                sync(device)
                t0 = time.perf_counter()
                gen.generate(problems, 1)
                sync(device)
                warm = time.perf_counter() - t0
                gen.stats.seconds = 0.0
                gen.stats.response_tokens = 0
                passes = gen.stats.forward_passes
                sync(device)
                t0 = time.perf_counter()
                out = gen.generate(problems, 1)
                sync(device)
                sec = time.perf_counter() - t0
            except Exception as exc:  # a mode that fails here is reported, the others still run
                print(f"| {b} | {mode} | failed: {type(exc).__name__}: {str(exc)[:200]} |")
                rows.append({"batch": b, "mode": mode, "error": f"{type(exc).__name__}: {exc}"[:500]})
                save()
                continue
            steps = gen.stats.forward_passes - passes
            toks = sum(len(r.response_ids) for r in out)
            ctx = args.prompt + args.tokens / 2
            step_bytes = weight_bytes + b * ctx * kv_per_token
            bound_ms = step_bytes / bw * 1e3
            ms = sec / max(1, steps) * 1e3
            row = {
                "batch": b,
                "mode": mode,
                "ms_per_step": ms,
                "tokens_per_s": toks / sec,
                "warmup_s": warm,
                "bound_ms": bound_ms,
                "fraction_of_bound": bound_ms / ms,
                "steps": steps,
            }
            rows.append(row)
            save()
            print(
                f"| {b} | {mode} | {ms:.3f} ms/step | {toks / sec:,.0f} tok/s | warm-up {warm:.1f} s | "
                f"bound {bound_ms:.3f} ms ({bound_ms / ms:.3f} of it) |",
                flush=True,
            )
    save()


if __name__ == "__main__":
    main()
