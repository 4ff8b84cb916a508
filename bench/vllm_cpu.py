"""Torch ``Generator`` vs ``VLLMGenerator`` generation throughput on the tiny Qwen2 (head_dim 32) on this CPU.

Run in the vLLM virtualenv: ``HF_HUB_OFFLINE=1 .venv-vllm/bin/python bench/vllm_cpu.py [--threads 1] [--repeats 3]``.
Same model weights (random init, float32, FP32 head), same recipe (temperature 1, ``length.mode: none``, cap 48),
addition prompts; wall time of ``generate`` after one warm-up call, best of ``--repeats``; response tokens/s.
Also the median time of ``VLLMGenerator.load_weights`` (whole state dict) over 10 loads.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", default="16x8,64x8")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import torch

    from rl_core.generation import Generator
    from rl_core.generation.vllm_backend import VLLMGenerator, VLLMOptions
    from rl_core.models import ModelConfig, build_model, build_tokenizer
    from rl_core.recipe import Recipe, apply_overrides
    from rl_core.tasks import build_task

    torch.set_num_threads(args.threads)
    cfg = ModelConfig(preset="tiny", arch="qwen2", num_attention_heads=2, num_key_value_heads=1)
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, dtype="float32", fp32_lm_head=True)
    recipe = apply_overrides(
        Recipe(), {"length.mode": "none", "length.max_response_tokens": 48, "precision.generator_dtype": "float32"}
    )
    problems = list(build_task({"kind": "synthetic-addition", "digits_max": 3}).problems("train"))
    t0 = time.perf_counter()
    vgen = VLLMGenerator.from_model(model, tok, recipe, device="cpu", seed=0, options=VLLMOptions(max_num_seqs=512))
    startup = time.perf_counter() - t0
    tgen = Generator(model, tok, recipe, seed=0)
    rows = []
    for spec in args.batches.split(","):
        p, n = (int(x) for x in spec.split("x"))
        batch = problems[:p]
        for name, gen in (("torch", tgen), ("vllm", vgen)):
            gen.generate(batch, n)  # warm-up
            best = 0.0
            for _ in range(args.repeats):
                start = time.perf_counter()
                out = gen.generate(batch, n)
                sec = time.perf_counter() - start
                tokens = sum(len(r.response_ids) for r in out)
                best = max(best, tokens / sec)
            rows.append((name, f"{p}x{n}", tokens / len(out), best))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    loads = []
    for v in range(10):
        start = time.perf_counter()
        vgen.load_weights(v + 1, state)
        loads.append(time.perf_counter() - start)
    vgen.close()
    loads.sort()
    print(f"vLLM engine start-up (save_pretrained + engine): {startup:.1f} s; threads {args.threads}")
    print(f"vLLM load_weights (whole state dict, layer-wise reload): median {1000 * loads[5]:.1f} ms")
    print(f"{'backend':8} {'batch':7} {'mean len':>8} {'tokens/s':>9}")
    for name, batch_s, mean, tps in rows:
        print(f"{name:8} {batch_s:7} {mean:8.1f} {tps:9.0f}")


if __name__ == "__main__":
    main()
