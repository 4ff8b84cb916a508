"""The FP32-accurate tensor-core head, measured where it runs: accuracy, memory and time of the head's
log-probs (``rl_core.algorithms.fused_head``) against the exact FP32 head with the whole logits.

1. Accuracy on real batches: the project's tiny models (presets ``tiny``, ``small``; head scaled so next-token
   entropy is ~1.5-2 nats) sample a ScaleRL batch; the trainer's log-probs of the sampled tokens through the exact
   FP32 head with the whole logits (``chunk_tokens=None``) vs the chunked fused head per operand scheme. Also a
   Qwen2-like layer (``--vocab`` x ``--hidden``) on random hidden states, against a float64 reference.
   Goal: max |delta log-prob| <= 1e-5 for ``bf16x6``.
2. Memory and time of one forward + backward of the head alone at ``--tokens`` x ``--hidden`` x ``--vocab``: the
   whole float32 logits (log_softmax + gather, autograd) vs the fused head chunked over tokens, per scheme. Memory
   is the growth of the process's resident high-water mark (``VmHWM``, reset first) in a fresh subprocess per
   variant (CPU) or ``max_memory_allocated`` (CUDA).
   On a CPU there are no tensor cores: the bf16 pieces are multiplied in float32 (6 products for bf16x6), so the
   CPU time ratio shows the cost of emulation, not the GPU speed.

    PYTHONPATH=. .venv/bin/python bench/compensated_head.py [--device cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench_args import int_flags  # noqa: E402  (bench/, this script's folder)

from rl_core.algorithms.fp32_head import enable_fp32_lm_head  # noqa: E402
from rl_core.algorithms.fused_head import fused_head_logprobs  # noqa: E402
from rl_core.engine.batch import Group, Sample, build_train_batch, group_rewards  # noqa: E402
from rl_core.engine.trainer import response_logprobs  # noqa: E402
from rl_core.models import ModelConfig, build_model, build_tokenizer  # noqa: E402
from rl_core.recipe import Recipe, apply_overrides  # noqa: E402

SCHEMES = ("bf16x6", "bf16x3", "bfloat16")
HEAD_SCALE = {"tiny": 4.5, "small": 3.0}
RECIPE = apply_overrides(Recipe(), {"precision.trainer_dtype": "float32", "loss.aggregation": "prompt"})


def sampled_batch_deltas(preset: str, seed: int, device: torch.device) -> dict[str, Any]:
    """max / mean |delta log-prob| per scheme against the exact FP32 head, on a batch the model sampled."""
    cfg = ModelConfig.model_validate({"preset": preset})
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, device, fp32_lm_head=True)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(HEAD_SCALE[preset])
    torch.manual_seed(seed)
    vocab, width = int(model.config.vocab_size), 32
    groups = []
    for p in range(8):
        prompt = torch.randint(4, vocab, (1, 6 + p % 4), device=device)
        with torch.no_grad():
            seqs = model.generate(
                prompt.repeat(8, 1), max_new_tokens=width, min_new_tokens=width, do_sample=True, top_k=0, pad_token_id=0
            )
        samples = tuple(
            Sample(
                f"p{p}",
                prompt[0].tolist(),
                seqs[i, prompt.shape[1] :].tolist(),
                [-1.0] * width,
                [0] * width,
                [1] * width,
                i % 2 == 0,
            )
            for i in range(8)
        )
        groups.append(Group(f"p{p}", samples))
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    ids, attn, mask = batch.input_ids.to(device), batch.attention_mask.to(device), batch.mask.bool().to(device)
    out: dict[str, Any] = {"preset": preset, "tokens": int(mask.sum())}
    with torch.no_grad():
        exact, ent = response_logprobs(model, ids, attn, batch, RECIPE, chunk_tokens=None)
        out["entropy_mean"] = float(ent[mask].mean())
        for scheme in SCHEMES:
            enable_fp32_lm_head(model, scheme)  # type: ignore[arg-type]
            lp, _ = response_logprobs(model, ids, attn, batch, RECIPE, chunk_tokens=64)
            d = (lp - exact)[mask].abs()
            out[scheme] = {"max": float(d.max()), "mean": float(d.mean())}
    return out


def layer_deltas(tokens: int, hidden: int, vocab: int, device: torch.device) -> dict[str, Any]:
    """A Qwen2-like head on RMS-normalised random hidden states, logits scaled to ~1.5-2 nats; against float64."""
    g = torch.Generator(device="cpu").manual_seed(0)
    h = torch.randn(tokens, hidden, generator=g).to(device)
    w = (torch.randn(vocab, hidden, generator=g) * 0.02).to(device)
    ref_logits = h.double() @ w.double().t()
    scale = 1.0
    for _ in range(30):  # bisect-free: grow the scale until the entropy falls under 2 nats
        lp = torch.log_softmax(ref_logits * scale, -1)
        if float(-(lp.exp() * lp).sum(-1).mean()) < 2.0:
            break
        scale *= 1.25
    w = w * scale
    ref = torch.log_softmax(h.double() @ w.double().t(), -1)
    targets = torch.distributions.Categorical(logits=ref.float()).sample()
    ref_lp = ref.gather(-1, targets[:, None]).squeeze(-1)
    out: dict[str, Any] = {"tokens": tokens, "hidden": hidden, "vocab": vocab}
    for scheme in ("float32", *SCHEMES):
        with torch.no_grad():
            lp, _ = fused_head_logprobs(h, w, None, targets, scheme=scheme, chunk=1024)  # type: ignore[arg-type]
        out[scheme] = float((lp.double() - ref_lp).abs().max())
    return out


def _rss(field: str) -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (its high-water mark) of this process, bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def one_variant(
    variant: str, tokens: int, hidden: int, vocab: int, chunk: int, device: torch.device
) -> dict[str, float]:
    """Seconds of forward + backward and the memory it took, for one head variant (run in a fresh process)."""
    g = torch.Generator(device="cpu").manual_seed(0)
    h = torch.randn(tokens, hidden, generator=g).to(device).requires_grad_()
    w = (torch.randn(vocab, hidden, generator=g) * 0.05).to(device).requires_grad_()
    t = torch.randint(0, vocab, (tokens,), generator=g).to(device)
    upstream = torch.randn(tokens, generator=g).to(device)

    def run() -> None:
        h.grad = w.grad = None
        if variant == "full":
            lp = torch.log_softmax(h @ w.t(), -1).gather(-1, t[:, None]).squeeze(-1)
        else:
            lp, _ = fused_head_logprobs(h, w, None, t, scheme=variant, chunk=chunk)  # type: ignore[arg-type]
        (lp * upstream).sum().backward()

    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    rss0 = _rss("VmRSS")  # the inputs exist; nothing of the head yet
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark (imports may have peaked higher)
    run()  # warm-up (counted in the peak: the first call allocates what the later ones reuse)
    t0 = time.perf_counter()
    reps = 3 if device.type == "cuda" else 1  # the CPU emulates bf16x6 with six float32 products: slow
    for _ in range(reps):
        run()
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = _rss("VmHWM") - rss0
    return {"seconds": (time.perf_counter() - t0) / reps, "peak_bytes": float(peak)}


def cost_rows(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    rows = {}
    for variant in ("full", "float32", *SCHEMES):
        cmd = [
            sys.executable,
            __file__,
            "--variant",
            variant,
            "--device",
            args.device,
            "--tokens",
            str(args.tokens),
            "--hidden",
            str(args.hidden),
            "--vocab",
            str(args.vocab),
            "--chunk",
            str(args.chunk),
            "--threads",
            str(args.threads),
        ]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        rows[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"  {variant}: {rows[variant]}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    int_flags(ap, tokens=4096, hidden=896, vocab=32768, chunk=512, threads=2)
    ap.add_argument("--presets", default="tiny,small", help="the tiny models whose sampled batches are compared")
    ap.add_argument("--seeds", type=int, default=2, help="sampled batches per preset")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.variant:
        print(json.dumps(one_variant(args.variant, args.tokens, args.hidden, args.vocab, args.chunk, device)))
        return
    t0 = time.perf_counter()
    print("== accuracy: sampled batches of the tiny models, |delta log-prob| vs the exact FP32 head", flush=True)
    batches = [sampled_batch_deltas(p, seed, device) for p in args.presets.split(",") for seed in range(args.seeds)]
    for b in batches:
        print(f"  {b}", flush=True)
    print(f"== accuracy: a {args.hidden} x {args.vocab} head vs float64", flush=True)
    layer = layer_deltas(1024, args.hidden, args.vocab, device)
    print(f"  {layer}", flush=True)
    print(f"== cost: forward + backward of the head, {args.tokens} tokens, chunk {args.chunk}", flush=True)
    cost = cost_rows(args)
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU {platform.machine()}, {os.cpu_count()} cores, {args.threads} threads",
        "torch": torch.__version__,
        "args": {k: v for k, v in vars(args).items() if k != "variant"},
        "command": " ".join(sys.argv),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    doc = {"meta": meta, "sampled_batches": batches, "layer": layer, "cost": cost}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    print()
    print("| batch | tokens | entropy | bf16x6 max / mean | bf16x3 max | bfloat16 max |")
    print("|---|---|---|---|---|---|")
    for b in batches:
        print(
            f"| {b['preset']} | {b['tokens']} | {b['entropy_mean']:.2f} | {b['bf16x6']['max']:.2e} / "
            f"{b['bf16x6']['mean']:.1e} | {b['bf16x3']['max']:.2e} | {b['bfloat16']['max']:.2e} |"
        )
    print(
        f"\nhead {args.hidden} x {args.vocab} vs float64: "
        + ", ".join(f"{k} {layer[k]:.2e}" for k in ("float32", *SCHEMES))
    )
    full = cost["full"]
    print(f"\n| head, {args.tokens} tokens | s (fwd+bwd) | x full | peak MiB | x full |")
    print("|---|---|---|---|---|")
    for name, r in cost.items():
        label = "whole float32 logits" if name == "full" else f"fused, chunk {args.chunk}, {name}"
        print(
            f"| {label} | {r['seconds']:.3f} | {r['seconds'] / full['seconds']:.2f} | "
            f"{r['peak_bytes'] / 2**20:.0f} | {r['peak_bytes'] / max(full['peak_bytes'], 1):.3f} |"
        )
    print(f"\n{meta['device']} · torch {meta['torch']} · {meta['date']} · {meta['seconds']} s")


if __name__ == "__main__":
    main()
