"""The trainer's step with and without length buckets (``rl_core.engine.length_buckets``), and the bucket cost's
``overhead_tokens`` swept, on batches shaped like the CPU side-by-side's (random-init ``small``, 8 prompts x 8
generations, responses 1-64 tokens with about half at the cap: a random model's lengths there).

    python bench/trainer_buckets.py                 # one thread, 12 timed steps per setting
    python bench/trainer_buckets.py --threads 2 --steps 20

Prints seconds per step for each setting (median of the timed steps, after 2 warm-up steps) and the padded tokens
the forward saw.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_args import int_flags

from rl_core.engine.batch import Group, Sample, build_train_batch, group_rewards
from rl_core.engine.length_buckets import length_buckets
from rl_core.engine.trainer import TorchTrainer
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe import get_preset


def make_groups(prompts: int, generations: int, cap: int, vocab: int, seed: int) -> list[Group]:
    rng = random.Random(seed)
    groups = []
    for p in range(prompts):
        prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(10, 20))]
        samples = []
        for g in range(generations):
            n = cap if rng.random() < 0.5 else rng.randint(1, cap)
            samples.append(
                Sample(
                    problem_id=f"p{p}",
                    prompt_ids=prompt,
                    response_ids=[rng.randrange(3, vocab) for _ in range(n)],
                    logprobs=[-rng.random() * 4 for _ in range(n)],
                    versions=[0] * n,
                    loss_mask=[1] * n,
                    correct=(g % 2 == 0),
                )
            )
        groups.append(Group(f"p{p}", tuple(samples)))
    return groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="small")
    int_flags(ap, threads=1, steps=12, prompts=8, generations=8, response=64, micro=64)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    recipe = get_preset("scalerl")
    cfg = ModelConfig(preset=args.preset)
    tok = build_tokenizer(cfg)
    vocab = len(tok)
    batches = []
    for s in range(args.steps + 2):
        groups = make_groups(args.prompts, args.generations, args.response, vocab, s)
        batch = build_train_batch(groups, group_rewards(groups, recipe), recipe, pad_id=0)
        assert batch is not None
        batches.append(batch)
    settings: list[tuple[str, int | None]] = [("one padded batch", None)]
    settings += [(f"buckets, overhead {o}", o) for o in (128, 256, 384, 512, 1024)]
    print(f"# {args.preset}, {args.prompts}x{args.generations} rows, cap {args.response}, threads {args.threads}")
    print("| setting | s/step (median) | forwards/step | padded tokens/step |")
    print("|---|---|---|---|")
    for label, overhead in settings:
        model = build_model(cfg, tok, torch.device("cpu"), dtype="float32", fp32_lm_head=True)
        trainer = TorchTrainer(
            model, recipe, device=torch.device("cpu"), micro_batch_size=args.micro, bucket_overhead_tokens=overhead
        )
        if overhead is not None:
            parts = [length_buckets(b, args.micro, overhead) for b in batches]
            forwards = [len(ps) for ps in parts]
            padded = [sum(p.input_ids.numel() for p in ps) for ps in parts]
        else:
            forwards = [1 for _ in batches]
            padded = [b.input_ids.numel() for b in batches]
        times = []
        for i, b in enumerate(batches):
            t0 = time.perf_counter()
            trainer.step(b)
            if i >= 2:
                times.append(time.perf_counter() - t0)
        print(
            f"| {label} | {statistics.median(times):.3f} | {statistics.mean(forwards):.1f} | "
            f"{statistics.mean(padded):,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
