"""Generator-vs-trainer log-prob mismatch in reduced precision, with and without the FP32 LM head.

What is measured. In RL the generator samples a token y_t and reports log pi_gen(y_t); the trainer recomputes
log pi_train(y_t) with the *same weights* and forms rho_t = exp(log pi_train - log pi_gen). On-policy, rho
should be exactly 1; any spread is numerical noise that the loss then treats as off-policyness. The two sides
compute the same function in two different ways:

- generator: prefill the prompt, then decode one token at a time reusing the KV cache (what an inference engine
  does), in the model dtype;
- trainer: one full-sequence forward over prompt + response (``rl_core.algorithms.token_logprobs``), same dtype.

Both run on the same token sequences, sampled once from the float32 model, for each (dtype, head) pair. We
report mean / p99 / max |log pi_train - log pi_gen| over the response tokens, the std of rho, and the share of
tokens with rho outside the PPO clip range [0.8, 1.2]. As a second view we give each side's mean |error| against
the float32 model.

The model is a randomly initialised Qwen2-like decoder. A random head gives near-uniform next-token
distributions (entropy ~ log V), far flatter than a trained LM; the head weight is therefore scaled so that the
mean next-token entropy is about ``--target-entropy`` nats, like a trained model sampling at temperature 1 (the
unscaled case is reported too, with ``--head-scale 1``).

A second table uses the engine's layout instead of one model per dtype: the trainer holds float32 master weights and
runs under bfloat16 autocast (``precision.trainer_dtype``), the generator holds bfloat16 weights; heads: native
(bf16 logits), the FP32 head with float32 operands, and with bfloat16 operands (``precision.lm_head_operands``:
float32 accumulation and logits over rounded operands, the tensor-core head), and with bf16x6 operands (each
float32 operand split into three bf16 pieces, float32-accurate on tensor cores).

Run:  .venv/bin/python bench/fp32_head_mismatch.py            (about two minutes on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass

import torch
from bench_args import int_flags
from transformers import DynamicCache, Qwen2Config, Qwen2ForCausalLM

from rl_core.algorithms.fp32_head import enable_fp32_lm_head, logprobs_from_logits, token_logprobs


@dataclass(frozen=True)
class Row:
    dtype: str
    head: str
    mean_abs: float
    p99_abs: float
    max_abs: float
    rho_std: float
    out_of_clip: float
    train_vs_fp32: float
    gen_vs_fp32: float


def build_model(args: argparse.Namespace) -> Qwen2ForCausalLM:
    torch.manual_seed(args.seed)
    cfg = Qwen2Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 11 // 4,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 64,
        num_key_value_heads=max(1, args.hidden // 128),
        max_position_embeddings=args.prompt_len + args.new_tokens + 8,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(cfg).eval()


@torch.no_grad()
def mean_entropy(model: Qwen2ForCausalLM, ids: torch.Tensor) -> float:
    logp = torch.log_softmax(model(ids).logits.float(), -1)
    return float(-(logp.exp() * logp).sum(-1).mean())


@torch.no_grad()
def calibrate_head(model: Qwen2ForCausalLM, ids: torch.Tensor, target: float) -> float:
    """Scale the head weight so the mean next-token entropy on ``ids`` is ~target nats (bisection in log)."""
    base = model.lm_head.weight.detach().clone()
    lo, hi = 1.0, 200.0
    for _ in range(18):
        mid = (lo * hi) ** 0.5
        model.lm_head.weight.copy_(base * mid)
        if mean_entropy(model, ids) > target:
            lo = mid
        else:
            hi = mid
    scale = (lo * hi) ** 0.5
    model.lm_head.weight.copy_(base * scale)
    return scale


@torch.no_grad()
def generator_logprobs(model: Qwen2ForCausalLM, seq: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """Prefill + one-token-at-a-time decode with a KV cache; log-probs of the given continuation."""
    cache = DynamicCache(config=model.config)
    out = model(seq[:, :prompt_len], past_key_values=cache, use_cache=True)
    logits = [out.logits[:, -1].float()]
    for t in range(prompt_len, seq.shape[1] - 1):
        out = model(seq[:, t : t + 1], past_key_values=out.past_key_values, use_cache=True)
        logits.append(out.logits[:, -1].float())
    return logprobs_from_logits(torch.stack(logits, 1), seq[:, prompt_len:])


def compare(dtype: str, head: str, train: torch.Tensor, gen: torch.Tensor, ref: torch.Tensor) -> Row:
    """Mismatch statistics of trainer vs generator log-probs (and each against the float32 model's)."""
    delta = (train - gen).flatten()
    rho = delta.exp()
    return Row(
        dtype=dtype,
        head=head,
        mean_abs=float(delta.abs().mean()),
        p99_abs=float(delta.abs().quantile(0.99)),
        max_abs=float(delta.abs().max()),
        rho_std=float(rho.std()),
        out_of_clip=float(((rho < 0.8) | (rho > 1.2)).float().mean()),
        train_vs_fp32=float((train - ref).abs().mean()),
        gen_vs_fp32=float((gen - ref).abs().mean()),
    )


def measure(
    reference: Qwen2ForCausalLM, seq: torch.Tensor, prompt_len: int, dtype: torch.dtype, fp32_head: bool
) -> Row:
    model = build_like(reference).to(dtype)
    if fp32_head:
        enable_fp32_lm_head(model)
    with torch.no_grad():
        gen = generator_logprobs(model, seq, prompt_len)
        train = token_logprobs(model, seq)[:, prompt_len - 1 :]
        ref = token_logprobs(reference, seq)[:, prompt_len - 1 :]
    return compare(str(dtype).removeprefix("torch."), "fp32" if fp32_head else "native", train, gen, ref)


def measure_engine_layout(reference: Qwen2ForCausalLM, seq: torch.Tensor, prompt_len: int, head: str) -> Row:
    """Trainer: float32 master weights under bf16 autocast; generator: bf16 weights with a KV cache."""
    generator = build_like(reference).to(torch.bfloat16)
    trainer = build_like(reference)
    if head != "native":
        operands = {"fp32 (bf16 operands)": "bfloat16", "fp32 (bf16x6 operands)": "bf16x6"}.get(head, "float32")
        enable_fp32_lm_head(generator, operands)  # type: ignore[arg-type]
        enable_fp32_lm_head(trainer, operands)  # type: ignore[arg-type]
    with torch.no_grad():
        gen = generator_logprobs(generator, seq, prompt_len)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            train = token_logprobs(trainer, seq)[:, prompt_len - 1 :]
        ref = token_logprobs(reference, seq)[:, prompt_len - 1 :]
    return compare("bf16 autocast / bf16", head, train, gen, ref)


def print_table(rows: list[Row]) -> None:
    print(
        "| dtype | LM head | mean abs dlogp | p99 abs dlogp | max abs dlogp | std(rho) | rho outside [0.8,1.2] "
        "| trainer vs fp32 | generator vs fp32 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.dtype} | {r.head} | {r.mean_abs:.4f} | {r.p99_abs:.4f} | {r.max_abs:.4f} | {r.rho_std:.4f} "
            f"| {100 * r.out_of_clip:.2f}% | {r.train_vs_fp32:.4f} | {r.gen_vs_fp32:.4f} |"
        )


def build_like(reference: Qwen2ForCausalLM) -> Qwen2ForCausalLM:
    model = Qwen2ForCausalLM(reference.config).eval()
    model.load_state_dict(reference.state_dict())
    return model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    int_flags(p, vocab=32768, hidden=256, layers=4, batch=16, prompt_len=16, new_tokens=128)
    p.add_argument("--target-entropy", type=float, default=1.5)
    p.add_argument("--head-scale", type=float, default=None, help="fixed head scale instead of calibrating")
    int_flags(p, seed=0, threads=1)
    p.add_argument("--dtypes", default="bfloat16,float16")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    reference = build_model(args)
    g = torch.Generator().manual_seed(args.seed + 1)
    prompts = torch.randint(0, args.vocab, (args.batch, args.prompt_len), generator=g)
    if args.head_scale is None:
        scale = calibrate_head(reference, prompts, args.target_entropy)
    else:
        scale = args.head_scale
        with torch.no_grad():
            reference.lm_head.weight.mul_(scale)
    torch.manual_seed(args.seed + 2)
    with torch.no_grad():
        seq = reference.generate(
            prompts,
            max_new_tokens=args.new_tokens,
            min_new_tokens=args.new_tokens,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            pad_token_id=0,
        )
    entropy = mean_entropy(reference, seq)
    params = sum(p.numel() for p in reference.parameters())

    rows = [
        measure(reference, seq, args.prompt_len, getattr(torch, name), head)
        for name in args.dtypes.split(",")
        for head in (False, True)
    ]
    layout = [
        measure_engine_layout(reference, seq, args.prompt_len, head)
        for head in ("native", "fp32", "fp32 (bf16 operands)", "fp32 (bf16x6 operands)")
    ]
    elapsed = time.perf_counter() - t0

    print(
        f"model: Qwen2-like, {params / 1e6:.1f}M params, vocab {args.vocab}, hidden {args.hidden}, "
        f"{args.layers} layers, untied head x{scale:.1f} (mean next-token entropy {entropy:.2f} nats)"
    )
    print(
        f"tokens: {args.batch} sequences x {args.new_tokens} sampled tokens (prompt {args.prompt_len}), "
        f"seed {args.seed}; torch {torch.__version__}, {args.threads} thread(s), {platform.machine()}"
    )
    print()
    print_table(rows)
    print()
    for name in args.dtypes.split(","):
        native, fp32 = (r for r in rows if r.dtype == name)
        ratio = native.mean_abs / fp32.mean_abs if fp32.mean_abs else float("inf")
        print(
            f"{name}: FP32 head cuts mean |dlogp| {ratio:.2f}x and std(rho) "
            f"{native.rho_std / fp32.rho_std if fp32.rho_std else float('inf'):.2f}x"
        )
    print()
    print("Engine layout: trainer float32 master weights under bf16 autocast, generator bf16 weights + KV cache")
    print()
    print_table(layout)
    print(f"elapsed {elapsed:.1f} s")


if __name__ == "__main__":
    main()
