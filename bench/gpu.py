"""The GPU path, measured: device ceilings, generation, trainers, weight sync and whole RL steps.

On a CUDA GPU, with randomly initialised models of realistic shape (presets ``qwen2-0.5b`` and ``qwen2-1.5b``):

1. device ceilings: the bf16 dense matmul peak (large square ``torch.matmul``, best of several), the fp32 matmul
   peak (what the recipe's FP32 LM head runs at) and the memory bandwidth (large device-to-device copy, bytes read
   + bytes written); from them the batch-1 decode bound = bandwidth / bytes of bf16 weights read per token;
2. generation tokens/s of ``rl_core.generation.Generator`` (bf16, the recipe's FP32 head, KV cache, fixed-length
   responses) at batch 1, 2, 4, ... until tokens/s gains < 10% or the GPU runs out of memory;
3. trainer tokens/s and MFU of ``TorchTrainer`` (and ``DeepSpeedTrainer`` ZeRO-1/2/3 when deepspeed imports) on a
   ScaleRL ``TrainBatch`` (bf16 autocast, FP32 head, CISPO, prompt aggregation);
   MFU = 6 · N_matmul · tokens/s / measured bf16 peak (N_matmul: every weight that takes part in a matmul, the LM
   head included, the embedding lookup not; attention FLOPs excluded). ``train_mfu_attn`` adds causal attention;
4. weight sync trainer -> generator: ``SharedWeights(..., device="cuda:0", dtype=bfloat16)`` shared with a spawned
   generator-side process (CUDA IPC, the colocated layout): publish + ``read_into`` + ``Generator.load_weights``;
   ``CollectiveWeights`` (bucketed NCCL broadcast) too when ``rl_core/engine/collective.py`` exists and 2 GPUs
   are visible;
5. a whole RL step: the real ``Engine`` for a few steps with the 0.5B shape (synthetic addition, the scalerl
   recipe, 8 prompts x 8 generations, short responses): seconds/step and sampled tokens/s, first step excluded.

Every number is measured on the machine it runs on; only the goals and the peers' published anchors are
constants. ``--smoke`` runs the same code paths on the CPU with the tiny/small presets and tiny sizes (well under
a minute on 2 cores): its numbers are CPU numbers, labelled so, never GPU numbers.

Usage (repo root; no install needed, see docs/gpu.md for the packages):

    PYTHONPATH=. python3 bench/gpu.py [--json PATH] [--models 0.5b,1.5b] [--only peak,gen,train,sync,engine]
    PYTHONPATH=. python3 bench/gpu.py --smoke --json /tmp/smoke.json
    PYTHONPATH=. python3 bench/gpu.py --merge a.json b.json      # one table from split runs

Prints progress, then a Markdown table last (metric, 0.5B, 1.5B, goal, met?) with the device, torch/CUDA
versions and the date.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import gc
import importlib.util
import json
import math
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

NEEDED = ("torch", "transformers", "pydantic", "yaml", "numpy")
SECTIONS = ("peak", "gen", "train", "sync", "engine")


def check_packages() -> None:
    """Exit 2 with a clear message when a package rl_core imports is missing (e.g. pydantic on a bare GPU box)."""
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        print(
            f"error: missing Python packages {missing}: rl_core needs them at import. On a machine without a "
            "registry carry them as wheels (docs/gpu.md, 'Benchmark on a bare GPU machine').",
            file=sys.stderr,
        )
        raise SystemExit(2)


check_packages()

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from rl_core.algorithms.fp32_head import enable_fp32_lm_head  # noqa: E402
from rl_core.engine.batch import Group, Sample, TrainBatch, build_train_batch  # noqa: E402
from rl_core.engine.trainer import TorchTrainer, Trainer  # noqa: E402
from rl_core.engine.weights import SharedWeights  # noqa: E402
from rl_core.generation import Generator  # noqa: E402
from rl_core.generation.attention import decode_attention  # noqa: E402
from rl_core.generation.flops import matmul_params, sequence_flops  # noqa: E402
from rl_core.models import ModelConfig, build_hf_config, build_model, build_tokenizer  # noqa: E402
from rl_core.recipe import Recipe, load_recipe  # noqa: E402
from rl_core.tasks.base import Problem  # noqa: E402

# DeepSpeed's ZeRO calls deprecated torch.distributed functions on every step: keep the progress output readable.
warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")

# ---- sizes --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """Every size the measurements use; ``FULL`` on a GPU, ``SMOKE`` on the CPU."""

    models: dict[str, str]  # column label -> model preset
    matmul_n: int
    matmul_reps: int
    copy_mib: int
    gen_prompt: int
    gen_response: int
    gen_max_batch: int
    train_prompt: int
    train_response: int
    train_prompts: int  # prompts x generations = rows of one optimiser step
    train_generations: int
    micro_tokens: int  # tokens per micro-batch (rows = micro_tokens // sequence length)
    train_steps: int  # timed steps after one warm-up step
    sync_updates: int
    engine_model: str
    engine_steps: int
    engine_prompts: int
    engine_generations: int
    engine_response: int
    threads: int
    optional_every_model: bool  # DeepSpeed and CollectiveWeights rows for every model (else the first only)


def _full_and_smoke(**sizes: tuple[Any, Any]) -> tuple[Sizes, Sizes]:
    """``FULL`` and ``SMOKE`` from one table: every size as (GPU value, CPU smoke value)."""
    return Sizes(**{k: v[0] for k, v in sizes.items()}), Sizes(**{k: v[1] for k, v in sizes.items()})


FULL, SMOKE = _full_and_smoke(
    models=({"0.5B": "qwen2-0.5b", "1.5B": "qwen2-1.5b"}, {"0.5B": "tiny", "1.5B": "small"}),
    matmul_n=(8192, 256),
    matmul_reps=(10, 3),
    copy_mib=(2048, 16),
    gen_prompt=(128, 8),
    gen_response=(256, 12),
    gen_max_batch=(1024, 8),
    train_prompt=(512, 8),
    train_response=(1536, 24),
    train_prompts=(8, 2),
    train_generations=(4, 2),
    micro_tokens=(8192, 64),
    train_steps=(3, 2),
    sync_updates=(5, 3),
    engine_model=("qwen2-0.5b", "tiny"),
    engine_steps=(8, 4),
    engine_prompts=(8, 2),
    engine_generations=(8, 2),
    engine_response=(128, 8),
    threads=(8, 1),
    optional_every_model=(True, False),
)

# ---- goals and the peers' published anchors (docs/benchmarks.md, ../shared/reference/peers.md) --------------

GOAL_DECODE_FRACTION = 0.5  # batch-1 decode within 2x of the bandwidth bound
GOAL_MFU_1_5B = 0.40
GOAL_MFU = 0.40  # at 0.5B and at 1.5B, bf16 body with the FP32-accurate head
GOAL_SYNC_S_0_5B = 0.2
PEER_TRAIN = "peers: prime-rl Qwen3-0.6B 16k seq 1xH100 ~11.9k tok/s (MFU ~11%)"
PEER_SYNC = "peers: Qwen3-0.6B ~0.18 s on H100 (NCCL)"
PEER_E2E = "peers: NeMo-RL Llama-3.1-8B 1,581-2,478 tok/s/GPU"
PEER_ASYNC = "peers: verl fully-async 2.35x, AReaL 2.77x (many GPUs, not colocated)"


# ---- results ------------------------------------------------------------------------------------------------


@dataclass
class Results:
    """metric -> column -> value, the reasons for skipped rows, per-measurement details, run metadata."""

    meta: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def put(self, metric: str, column: str, value: float) -> None:
        self.metrics.setdefault(metric, {})[column] = float(value)

    def get(self, metric: str, column: str) -> float | None:
        return self.metrics.get(metric, {}).get(column)

    def skip(self, metric: str, reason: str) -> None:
        self.skipped[metric] = reason
        print(f"  skipped {metric}: {reason}", flush=True)

    def to_json(self) -> dict[str, Any]:
        return {"meta": self.meta, "metrics": self.metrics, "skipped": self.skipped, "details": self.details}


def log(msg: str) -> None:
    print(msg, flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "out of memory" in str(exc).lower()


def timed(fn: Callable[[], Any], device: torch.device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def model_config(preset: str) -> ModelConfig:
    return ModelConfig.model_validate({"preset": preset})


def weight_bytes_per_token(preset: str) -> tuple[float, float]:
    """(bf16 bytes of matmul weights read per decoded token, the same with the FP32 head as implemented).

    Without autograd the FP32 head caches its float32 upcast between weight updates (``FP32LMHead``), so a decode
    step reads 4 bytes per head weight instead of 2 (the one upcast per weight update is not per token)."""
    cfg = build_hf_config(model_config(preset), build_tokenizer(model_config(preset)))
    n = matmul_params(cfg)
    head = cfg.hidden_size * cfg.vocab_size
    return 2.0 * n, 2.0 * (n - head) + 4.0 * head


def head_share(preset: str) -> float:
    cfg = build_hf_config(model_config(preset), build_tokenizer(model_config(preset)))
    return float(cfg.hidden_size * cfg.vocab_size / matmul_params(cfg))


# ---- 1. device ceilings -------------------------------------------------------------------------------------


def matmul_peak(device: torch.device, dtype: torch.dtype, n: int, reps: int, trials: int = 5) -> float:
    """Best-of-``trials`` TFLOP/s of ``reps`` back-to-back n x n x n matmuls on random data."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b, out=out)
    best = math.inf
    for _ in range(trials):
        best = min(best, timed(lambda: [torch.matmul(a, b, out=out) for _ in range(reps)], device))
    return 2.0 * n**3 * reps / best / 1e12


def copy_bandwidth(device: torch.device, mib: int, reps: int = 10, trials: int = 5) -> float:
    """Best-of-``trials`` GB/s of a device-to-device copy, counting bytes read + bytes written."""
    src = torch.randn(mib * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(trials):
        best = min(best, timed(lambda: [dst.copy_(src) for _ in range(reps)], device))
    return 2.0 * src.numel() * 4 * reps / best / 1e9


def measure_peaks(res: Results, device: torch.device, s: Sizes) -> None:
    log("== device ceilings")
    bf16 = matmul_peak(device, torch.bfloat16, s.matmul_n, s.matmul_reps)
    fp32 = matmul_peak(device, torch.float32, s.matmul_n, max(1, s.matmul_reps // 3), trials=3)
    bw = copy_bandwidth(device, s.copy_mib)
    free_memory()
    log(f"  bf16 matmul {bf16:.1f} TFLOP/s, fp32 matmul {fp32:.1f} TFLOP/s, copy {bw:.0f} GB/s")
    for col, preset in s.models.items():
        res.put("peak_bf16_tflops", col, bf16)
        res.put("peak_fp32_tflops", col, fp32)
        res.put("bandwidth_gbs", col, bw)
        plain, fp32_head = weight_bytes_per_token(preset)
        res.put("decode_bound_tokens_s", col, bw * 1e9 / plain)
        res.put("decode_bound_fp32_head_tokens_s", col, bw * 1e9 / fp32_head)
        # The trainer's MFU ceiling when the LM head's share of the matmul FLOPs runs at the fp32 rate.
        h = head_share(preset)
        res.put("train_mfu_ceiling_fp32_head", col, 1.0 / ((1.0 - h) + h * bf16 / fp32))


# ---- 2. generation ------------------------------------------------------------------------------------------


def gen_recipe(s: Sizes) -> Recipe:
    """The scalerl recipe (bf16 generator, FP32 head, temperature 1, top-p 1) with fixed-length responses."""
    return load_recipe(
        {
            "preset": "scalerl",
            "length": {"mode": "none", "max_prompt_tokens": s.gen_prompt + 8, "max_response_tokens": s.gen_response},
        }
    )


def fixed_prompts(count: int, tokens: int) -> list[Problem]:
    """``count`` prompts of exactly ``tokens`` tokens with the character tokenizer (<bos> + tokens-1 chars)."""
    alphabet = "0123456789+ =abcdefghij"
    return [
        Problem(f"p{i}", "".join(alphabet[(i * 7 + j * 3) % len(alphabet)] for j in range(tokens - 1)), "0")
        for i in range(count)
    ]


def measure_generation(res: Results, col: str, preset: str, device: torch.device, s: Sizes) -> None:
    log(f"== generation {col} ({preset})")
    recipe = gen_recipe(s)
    cfg = model_config(preset)
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, device, dtype=recipe.precision.generator_dtype, fp32_lm_head=True)
    sweep: list[dict[str, float]] = []
    batch, best = 1, 0.0
    try:
        while batch <= s.gen_max_batch:
            prompts = fixed_prompts(batch, s.gen_prompt)
            try:
                Generator(model, tok, recipe, device=device, max_new_tokens=4, seed=batch).generate(prompts, 1)
                gen = Generator(model, tok, recipe, device=device, max_new_tokens=s.gen_response, seed=batch)
                rollouts: list[Any] = []
                seconds = timed(lambda: rollouts.extend(gen.generate(prompts, 1)), device)  # noqa: B023
            except Exception as exc:
                if not is_oom(exc):
                    raise
                log(f"  batch {batch}: out of memory, stop")
                res.details.setdefault("gen_stop", {})[col] = f"out of memory at batch {batch}"
                break
            tokens = sum(len(r.response_ids) for r in rollouts)
            tps = tokens / seconds
            sweep.append({"batch": batch, "tokens": tokens, "seconds": seconds, "tokens_per_s": tps})
            log(f"  batch {batch:5d}: {tps:10.1f} tokens/s ({tokens} tokens in {seconds:.2f} s)")
            if batch == 1:
                res.put("gen_b1_tokens_s", col, tps)
            if batch > 1 and tps < 1.10 * best:
                res.details.setdefault("gen_stop", {})[col] = f"gain < 10% at batch {batch}"
                best = max(best, tps)
                break
            best = max(best, tps)
            batch *= 2
    finally:
        del model
        free_memory()
    res.details.setdefault("gen_sweep", {})[col] = sweep
    if sweep:
        top = max(sweep, key=lambda r: r["tokens_per_s"])
        res.put("gen_peak_tokens_s", col, top["tokens_per_s"])
        res.put("gen_peak_batch", col, top["batch"])
        bound = res.get("decode_bound_tokens_s", col)
        b1 = res.get("gen_b1_tokens_s", col)
        if bound and b1:
            res.put("gen_b1_fraction_of_bound", col, b1 / bound)


# ---- 3. trainers --------------------------------------------------------------------------------------------


def train_recipe(head_operands: str = "float32") -> Recipe:
    """The scalerl recipe as is: bf16 autocast, FP32 head, CISPO, prompt aggregation, AdamW; ``head_operands``
    bfloat16 is the FP32 head on tensor cores (``precision.lm_head_operands``)."""
    return load_recipe({"preset": "scalerl", "precision": {"lm_head_operands": head_operands}})


#: trainer variants measured: name -> FP32 head operands (``torch_bf16head``: the tensor-core head; ``x6head``: the
#: error-compensated tensor-core head, float32-accurate, fused with the log-softmax and chunked)
HEAD_OPERANDS = {
    "torch": "float32",
    "torch_x6head": "bf16x6",
    "torch_x6head_compiled": "bf16x6",  # the decoder body under torch.compile (inductor; aot_eager on the CPU)
    "torch_x6head_auto": "bf16x6",  # micro-batches sized from free memory (rl_core.engine.micro_batch)
    "torch_bf16head": "bfloat16",
    "torch_bf16head_nocudnn": "bfloat16",
    "torch_fulllogits": "float32",  # the exact head with the whole [rows, T, V] float32 logits (pre-chunking)
    "zero1": "bf16x6",
    "zero2": "bf16x6",
    "zero3": "bf16x6",
}
#: the trainer rows run by default, in order (``--trainers`` picks others; the DeepSpeed ones need ``optional``)
DEFAULT_TRAINERS = ("torch", "torch_x6head", "torch_x6head_compiled", "torch_x6head_auto", "torch_bf16head")
OPTIONAL_TRAINERS = ("zero1", "zero2", "zero3")


def trainer_key(backend: str) -> str:
    """The suffix of a trainer variant's metrics: ``train_tokens_s`` for ``torch``, ``train_tokens_s_zero1`` ..."""
    return "" if backend == "torch" else f"_{backend}"


def synthetic_batch(recipe: Recipe, vocab: int, pad_id: int, s: Sizes) -> TrainBatch:
    """A full ScaleRL batch of fixed-length sequences through the engine's own ``build_train_batch``: half of
    every group correct (no group is filtered), old log-probs at a random model's -log(V)."""
    gen = torch.Generator().manual_seed(0)
    old = -math.log(vocab)
    groups, rewards = [], []
    for p in range(s.train_prompts):
        prompt = torch.randint(8, vocab, (s.train_prompt,), generator=gen).tolist()
        samples = []
        for g in range(s.train_generations):
            resp = torch.randint(8, vocab, (s.train_response,), generator=gen).tolist()
            samples.append(
                Sample(
                    problem_id=f"p{p}",
                    prompt_ids=prompt,
                    response_ids=resp,
                    logprobs=[old] * s.train_response,
                    versions=[0] * s.train_response,
                    loss_mask=[1] * s.train_response,
                    correct=g % 2 == 0,
                )
            )
        groups.append(Group(f"p{p}", tuple(samples)))
        rewards.append([1.0 if smp.correct else -1.0 for smp in samples])
    batch = build_train_batch(groups, rewards, recipe, pad_id=pad_id)
    assert batch is not None
    return batch


def make_trainer(backend: str, model: torch.nn.Module, recipe: Recipe, device: torch.device, micro: int) -> Trainer:
    if backend.startswith("torch"):
        chunk = None if backend == "torch_fulllogits" else 0  # 0: chunked log-probs (rl_core default)
        compile_backend = None
        if backend.endswith("_compiled"):
            compile_backend = "inductor" if device.type == "cuda" else "aot_eager"  # CPU: no C++ compiler needed
        return TorchTrainer(
            model,
            recipe,
            device=device,
            micro_batch_size="auto" if backend.endswith("_auto") else micro,
            logprob_chunk_tokens=chunk,
            compile_backend=compile_backend,
        )
    from rl_core.engine.trainer_deepspeed import DeepSpeedTrainer

    return DeepSpeedTrainer(model, recipe, device=device, zero_stage=int(backend[-1]), micro_batch_size=micro)


def run_trainer(
    backend: str, model_fn: Callable[[], torch.nn.Module], batch: TrainBatch, device: torch.device, s: Sizes
) -> tuple[float, int, torch.nn.Module | None]:
    """(seconds per step, micro-batch rows, the trained model for torch) at the largest micro-batch that fits:
    ``micro_tokens`` tokens per micro-batch, halved on out-of-memory."""
    recipe = train_recipe(HEAD_OPERANDS[backend])
    seq = batch.input_ids.shape[1]
    micro = max(1, s.micro_tokens // seq)
    while True:
        model = model_fn()
        trainer: Trainer | None = None
        try:
            trainer = make_trainer(backend, model, recipe, device, micro)
            # ``_nocudnn``: SDPA without cuDNN attention, as the generator decodes (rl_core/generation/attention.py)
            attention = decode_attention(device) if backend.endswith("_nocudnn") else contextlib.nullcontext()
            with attention:
                trainer.step(batch)  # warm-up: allocator, cuBLAS handles, optimiser state
                seconds = timed(lambda: [trainer.step(batch) for _ in range(s.train_steps)], device) / s.train_steps  # noqa: B023
            plan = getattr(trainer, "plan", None)
            rows = plan.rows if plan is not None else micro
            return seconds, rows, model if backend == "torch" else None
        except Exception as exc:
            if not is_oom(exc) or micro == 1:
                raise
            log(f"  {backend}: out of memory at {micro} rows per micro-batch; halving")
            micro //= 2
        finally:
            del trainer
            free_memory()
        del model
        free_memory()


def measure_trainers(
    res: Results,
    col: str,
    preset: str,
    device: torch.device,
    s: Sizes,
    *,
    optional: bool = True,
    trainers: tuple[str, ...] = DEFAULT_TRAINERS,
) -> torch.nn.Module | None:
    """Trainer tokens/s, MFU and memory high-water mark per backend; returns the torch-trained model (for sync).

    The model is built once (random init on the CPU, timed apart as ``build_s``) before any timed step; each
    backend trains a copy moved to the device, so set-up never eats a stage's time limit."""
    log(f"== trainers {col} ({preset})")
    recipe = train_recipe()
    cfg = model_config(preset)
    tok = build_tokenizer(cfg)
    hf = build_hf_config(cfg, tok)
    batch = synthetic_batch(recipe, hf.vocab_size, int(tok.pad_token_id or 0), s)
    tokens = int(batch.attention_mask.sum())
    n_matmul = matmul_params(hf)
    flops_attn = batch.rows * sequence_flops(hf, s.train_prompt, s.train_response, training=True)
    peak = res.get("peak_bf16_tflops", col)
    t0 = time.perf_counter()
    template = build_model(cfg, tok, "cpu", dtype="float32", fp32_lm_head=recipe.precision.fp32_lm_head)
    res.details.setdefault("build_s", {})[col] = round(time.perf_counter() - t0, 2)
    log(f"  model built once in {time.perf_counter() - t0:.1f} s (CPU, float32); each backend trains a copy")

    def fresh(operands: str) -> Callable[[], torch.nn.Module]:
        def build() -> torch.nn.Module:
            model = copy.deepcopy(template).to(device)
            if recipe.precision.fp32_lm_head:
                enable_fp32_lm_head(model, operands)  # type: ignore[arg-type]
            return model

        return build

    backends = [b for b in trainers if b in HEAD_OPERANDS and b not in OPTIONAL_TRAINERS]
    if device.type != "cuda":
        backends = [b for b in backends if not b.endswith("_nocudnn")]
    wanted_optional = [b for b in trainers if b in OPTIONAL_TRAINERS]
    has_deepspeed = importlib.util.find_spec("deepspeed") is not None
    if optional and has_deepspeed:
        backends += wanted_optional
    elif optional:
        for b in wanted_optional:
            res.skip(f"train_tokens_s_{b}", "deepspeed is not installed here")
    kept: torch.nn.Module | None = None
    for backend in backends:
        key = trainer_key(backend)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        try:
            seconds, micro, model = run_trainer(backend, fresh(HEAD_OPERANDS[backend]), batch, device, s)
        except Exception as exc:
            res.skip(f"train_tokens_s{key}", f"{backend} trainer failed: {type(exc).__name__}: {exc}".splitlines()[0])
            free_memory()
            continue
        if model is not None and backend == "torch":
            kept = model
        tps = tokens / seconds
        res.put(f"train_tokens_s{key}", col, tps)
        peak_gib = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
        if peak_gib is not None:
            res.put(f"train_peak_gib{key}", col, peak_gib)
        res.details.setdefault("train", {}).setdefault(col, {})[backend] = {
            "seconds_per_step": seconds,
            "tokens_per_step": tokens,
            "rows": batch.rows,
            "sequence": s.train_prompt + s.train_response,
            "micro_batch_rows": micro,
            "micro_batch_tokens": micro * (s.train_prompt + s.train_response),
            "peak_gib": peak_gib,
            "head_operands": HEAD_OPERANDS[backend],
        }
        msg = f"  {backend}: {tps:.0f} tokens/s ({seconds:.3f} s/step, {tokens} tokens, micro-batch {micro} rows)"
        if peak:
            mfu = 6.0 * n_matmul * tps / (peak * 1e12)
            res.put(f"train_mfu{key}", col, mfu)
            if backend == "torch":
                res.put("train_mfu_attn", col, flops_attn / seconds / (peak * 1e12))
            msg += f", MFU {100 * mfu:.1f}%"
        if peak_gib is not None:
            msg += f", peak {peak_gib:.1f} GiB"
        log(msg)
    free_memory()
    return kept


# ---- 4. weight sync -----------------------------------------------------------------------------------------


def _sync_reader(preset: str, device: str, threads: int, shared: SharedWeights, go: Any, back: Any) -> None:
    """Generator side (spawned), as the engine's generator process does it: its own bf16 model; per update
    ``read_into`` a staging copy allocated once, then ``Generator.load_weights`` into the model, both timed."""
    try:
        torch.set_num_threads(threads)  # threads build the model; the sync itself runs on the device
        dev = torch.device(device)
        recipe = train_recipe()
        cfg = model_config(preset)
        tok = build_tokenizer(cfg)
        model = build_model(cfg, tok, dev, dtype=recipe.precision.generator_dtype, fp32_lm_head=True)
        gen = Generator(model, tok, recipe, device=dev)
        staging = {k: torch.empty_like(v, device=dev) for k, v in shared.tensors.items()}
        probe = next(iter(shared.tensors))
        back.put(("ready", 0, 0.0, 0.0, 0.0, 0.0))
        while go.get() is not None:
            t0 = time.perf_counter()
            got = shared.read_into(staging)
            sync(dev)
            t1 = time.perf_counter()
            gen.load_weights(got, staging)
            sync(dev)
            t2 = time.perf_counter()
            stamp = float(staging[probe].reshape(-1)[0])
            back.put(("ok", got, t1 - t0, t2 - t1, time.time(), stamp))
    except BaseException as exc:
        back.put(("error", -1, 0.0, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))
        raise


def measure_shared_sync(
    res: Results, col: str, preset: str, device: torch.device, model: torch.nn.Module | None, s: Sizes
) -> None:
    log(f"== weight sync {col} ({preset}): SharedWeights on {device} (CUDA IPC when on a GPU)")
    if model is None:
        model = build_model(model_config(preset), build_tokenizer(model_config(preset)), device, dtype="float32")
    state = model.state_dict()
    shared = SharedWeights(state, version=0, device=device, dtype=torch.bfloat16)
    probe = next(iter(shared.tensors))
    shared_numel = shared.numel()
    ctx = mp.get_context("spawn")
    go, back = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(
        target=_sync_reader, args=(preset, str(device), torch.get_num_threads(), shared, go, back), daemon=True
    )
    proc.start()
    rows: list[dict[str, float]] = []
    try:
        first = back.get(timeout=900)
        if first[0] != "ready":
            raise RuntimeError(f"reader failed: {first[-1]}")
        for version in range(1, s.sync_updates + 2):
            with torch.no_grad():
                state[probe].reshape(-1)[0] = float(version)  # stamp: the reader must see this version's data
            start = time.time()
            t0 = time.perf_counter()
            shared.publish(state, version)
            sync(device)  # publish only queues the copies on a GPU: the reader may read once they are done
            publish = time.perf_counter() - t0
            go.put(version)
            kind, got, read, load, done, stamp = back.get(timeout=600)
            if kind != "ok":
                raise RuntimeError(f"reader failed: {stamp}")
            if got != version or stamp != float(version):
                raise RuntimeError(f"reader got version {got} with stamp {stamp}, expected {version}")
            if version > 1:  # the first update is a warm-up
                rows.append({"publish_s": publish, "read_s": read, "load_s": load, "latency_s": done - start})
        go.put(None)
        proc.join(timeout=60)
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=10)
        del shared, state
        free_memory()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    res.details.setdefault("sync", {})[col] = {"updates": rows, "median": med, "bf16_bytes": 2 * shared_numel}
    res.put("sync_shared_s", col, med["latency_s"])
    res.put("sync_shared_publish_s", col, med["publish_s"])
    log(
        f"  publish {med['publish_s'] * 1e3:.1f} ms, read_into {med['read_s'] * 1e3:.1f} ms, load "
        f"{med['load_s'] * 1e3:.1f} ms, publish start -> generator holds it {med['latency_s'] * 1e3:.1f} ms"
    )


def _collective_receiver(weights: Any, device: str, go: Any, back: Any) -> None:
    """Generator side of ``CollectiveWeights`` (spawned): connect, then per update wait for the version and
    ``read_into`` a staging copy (the API announced for rl_core/engine/collective.py)."""
    try:
        dev = torch.device(device)
        weights.connect_receiver(dev)
        staging = {k: torch.empty_like(v, device=dev) for k, v in weights.tensors.items()}
        back.put(("ready", 0, 0.0, 0.0))
        while (version := go.get()) is not None:
            deadline = time.monotonic() + 120
            while weights.version < version:  # the receiver thread takes each broadcast as it comes
                if time.monotonic() > deadline:
                    raise TimeoutError(f"version {version} never arrived")
                time.sleep(0.0002)
            got = weights.read_into(staging)
            sync(dev)
            back.put(("ok", got, time.time(), 0.0))
        weights.close()
    except BaseException as exc:
        back.put(("error", -1, 0.0, f"{type(exc).__name__}: {exc}"))
        raise


def measure_collective_sync(
    res: Results, col: str, preset: str, device: torch.device, model: torch.nn.Module | None, s: Sizes
) -> None:
    """Trainer rank 0 -> generator rank 1 over ``CollectiveWeights`` (nccl on CUDA, gloo on CPU), when the module
    exists and (on CUDA) two GPUs are visible; otherwise the row is skipped with the reason."""
    if importlib.util.find_spec("rl_core.engine.collective") is None:
        res.skip("sync_collective_s", "rl_core/engine/collective.py (CollectiveWeights) is not in this checkout yet")
        return
    if device.type == "cuda" and torch.cuda.device_count() < 2:
        seen = torch.cuda.device_count()
        res.skip("sync_collective_s", f"needs 2 GPUs (trainer rank 0, generator rank 1); {seen} visible")
        return
    from rl_core.engine.collective import CollectiveWeights

    log(f"== weight sync {col} ({preset}): CollectiveWeights")
    if model is None:
        model = build_model(model_config(preset), build_tokenizer(model_config(preset)), device, dtype="float32")
    state = model.state_dict()
    recv = "cuda:1" if device.type == "cuda" else "cpu"
    weights = CollectiveWeights(
        state,
        init_method=f"tcp://127.0.0.1:{free_port()}",
        backend="nccl" if device.type == "cuda" else "gloo",
        bucket_mb=256 if device.type == "cuda" else 4,
        timeout_s=120,
        version=0,
        dtype=torch.bfloat16,
    )
    ctx = mp.get_context("spawn")
    go, back = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_collective_receiver, args=(weights, recv, go, back), daemon=True)
    proc.start()
    rows: list[dict[str, float]] = []
    try:
        weights.connect_sender(device)
        first = back.get(timeout=300)
        if first[0] != "ready":
            raise RuntimeError(f"receiver failed: {first[-1]}")
        for version in range(1, s.sync_updates + 2):
            go.put(version)
            start = time.time()
            t0 = time.perf_counter()
            weights.publish(state, version)
            sync(device)
            publish = time.perf_counter() - t0
            kind, got, done, err = back.get(timeout=300)
            if kind != "ok" or got != version:
                raise RuntimeError(f"receiver: {kind} version {got} {err}")
            if version > 1:
                rows.append({"publish_s": publish, "latency_s": done - start})
        go.put(None)
        weights.close()
        proc.join(timeout=60)
    except Exception as exc:
        res.skip("sync_collective_s", f"CollectiveWeights timing failed: {type(exc).__name__}: {exc}".splitlines()[0])
        return
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=10)
        free_memory()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    res.details.setdefault("sync_collective", {})[col] = {"updates": rows, "median": med}
    res.put("sync_collective_s", col, med["latency_s"])
    log(f"  publish {med['publish_s'] * 1e3:.1f} ms, latency {med['latency_s'] * 1e3:.1f} ms")


# ---- 5. whole RL steps --------------------------------------------------------------------------------------


def short_length(r: int) -> dict[str, Any]:
    """The recipe's ``length`` section for responses of at most ``r`` tokens (a 64-token prompt): the interruption
    budget in the last quarter, the answer and overlong budgets an eighth of ``r`` each."""
    return {
        "max_prompt_tokens": 64,
        "max_response_tokens": r,
        "interruption": {"budget_min": r - r // 4, "budget_max": r - r // 8, "answer_budget": r // 8},
        "overlong": {"cache_tokens": max(1, r // 8)},
    }


def addition_run(preset: str, steps: int) -> dict[str, Any]:
    """The config keys the engine benchmarks share: model ``preset`` on synthetic addition for ``steps`` steps, with
    no evaluation and no checkpoint inside the run (both every 10**6 steps)."""
    return {
        "model": {"preset": preset},
        "task": {"kind": "synthetic-addition", "digits_max": 3},
        "budget": {"steps": steps},
        "eval": {"every": 10**6, "k": 1, "prompts": 1},
        "checkpoint": {"every": 10**6, "keep": 1},
    }


def engine_config(device: torch.device, s: Sizes, mode: str = "pipeline") -> dict[str, Any]:
    """The scalerl recipe on synthetic addition with short responses, PipelineRL-8 (``mode="pipeline"``) or one
    batch then one step (``mode="sync"``). ``filters.zero_variance: none``: a random model never solves a problem,
    so the recipe's filter would drop every group and skip every update; kept, they still cost a full
    forward/backward (advantage 0), which is what a step costs."""
    r = s.engine_response
    pipeline = {"mode": "pipeline", "k": 8} if mode == "pipeline" else {"mode": "sync"}
    return {
        "name": "gpu-bench",
        "seed": 0,
        "device": str(device),
        "threads": s.threads,
        "recipe": {
            "preset": "scalerl",
            "batch": {"prompts": s.engine_prompts, "generations": s.engine_generations},
            "pipeline": pipeline,
            "filters": {"zero_variance": "none"},
            "length": short_length(r),
        },
        **addition_run(s.engine_model, s.engine_steps),
        "generator": {"max_new_tokens": r},
        "sinks": {"console": False, "csv": False},
    }


ENGINE_MODES = {"pipeline": "", "sync": "_sync"}  # mode -> metric suffix


def measure_engine(res: Results, device: torch.device, s: Sizes, mode: str = "pipeline") -> None:
    """``s.engine_steps`` steps of the real engine in ``mode``; seconds/step and sampled tokens/s over steps
    2..N-1 (the first pays the start-up, the last the final evaluation)."""
    from rl_core.contracts.points import read_points
    from rl_core.contracts.run_config import parse_run_config
    from rl_core.engine.runner import run

    col = next(c for c, p in s.models.items() if p == s.engine_model)
    suffix = ENGINE_MODES[mode]
    sizes = f"{s.engine_steps} steps, {s.engine_prompts}x{s.engine_generations}"
    log(f"== engine {col} ({s.engine_model}, {mode}): {sizes}")
    out = Path(tempfile.mkdtemp(prefix="scalerl-gpu-bench-"))
    try:
        result = run(parse_run_config(engine_config(device, s, mode)), out / "run")
        if result.status != "succeeded":
            raise RuntimeError(f"engine run {result.status}: {result.reason}")
        points = [p for p in read_points(out / "run" / "metrics.jsonl") if p.step >= 1]
        window = [p for p in points if 2 <= p.step <= s.engine_steps - 1]
        seconds = window[-1].wall_time - points[0].wall_time
        sampled = sum(p.metrics["train/samples"] * p.metrics["train/response_length_mean"] for p in window)
        res.put(f"engine{suffix}_step_s", col, seconds / len(window))
        res.put(f"engine{suffix}_tokens_s", col, sampled / seconds)
        res.details[f"engine{suffix}"] = {
            "mode": mode,
            "steps_timed": len(window),
            "seconds": seconds,
            "sampled_tokens": sampled,
            "step_seconds": [p.metrics.get("train/step_seconds", 0.0) for p in window],
            "gen_busy_seconds": [p.metrics.get("gen/busy_seconds", 0.0) for p in window],
            "staleness_mean": [p.metrics.get("train/staleness_mean", 0.0) for p in window],
        }
        log(f"  {seconds / len(window):.2f} s/step, {sampled / seconds:.0f} sampled tokens/s")
    finally:
        shutil.rmtree(out, ignore_errors=True)
        free_memory()
    pipe, sync_s = res.metrics.get("engine_step_s", {}).get(col), res.metrics.get("engine_sync_step_s", {}).get(col)
    if pipe and sync_s:
        res.put("engine_speedup", col, sync_s / pipe)


# ---- the table ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    fmt: str
    goal: str = ""
    check: Callable[[str, float], bool | None] = lambda col, v: None


def at_least(goal: float, column: str | None = None) -> Callable[[str, float], bool | None]:
    """A row's check: the value reaches ``goal`` (in ``column`` only, when given; no verdict elsewhere)."""
    return lambda col, v: v >= goal if column is None or col == column else None


def trainer_rows(
    backend: str,
    tokens: str,
    mfu: str,
    peak: str | None = None,
    *,
    goal: str = "",
    check: Callable[[str, float], bool | None] = lambda col, v: None,
) -> tuple[Row, ...]:
    """A trainer variant's rows (``measure_trainers``' metrics): tokens/s, MFU (with the goal) and, when labelled,
    the memory high-water mark."""
    key = trainer_key(backend)
    rows = (Row(f"train_tokens_s{key}", tokens, "{:.0f}"), Row(f"train_mfu{key}", mfu, "{:.1%}", goal, check))
    return rows + ((Row(f"train_peak_gib{key}", peak, "{:.1f}"),) if peak else ())


MFU_GOAL = f"≥ {GOAL_MFU:.0%} at 0.5B and 1.5B"
MFU_GOAL_1_5B = f"≥ {GOAL_MFU_1_5B:.0%} at 1.5B"

ROWS = (
    Row("peak_bf16_tflops", "bf16 matmul peak, TFLOP/s (measured)", "{:.3g}"),
    Row("peak_fp32_tflops", "fp32 matmul peak, TFLOP/s (FP32 head rate)", "{:.3g}"),
    Row("bandwidth_gbs", "memory bandwidth, GB/s (copy, read+write)", "{:.4g}"),
    Row("decode_bound_tokens_s", "decode bound at batch 1, tokens/s (bf16 weights)", "{:.0f}"),
    Row("decode_bound_fp32_head_tokens_s", "decode bound with the FP32 head as implemented", "{:.0f}"),
    Row("gen_b1_tokens_s", "generation tokens/s, batch 1", "{:.1f}"),
    Row(
        "gen_b1_fraction_of_bound",
        "batch 1 / decode bound",
        "{:.3g}",
        f"≥ {GOAL_DECODE_FRACTION} (within 2×)",
        at_least(GOAL_DECODE_FRACTION),
    ),
    Row("gen_peak_tokens_s", "generation tokens/s, saturated", "{:.0f}"),
    Row("gen_peak_batch", "batch at saturation", "{:.0f}"),
    Row("train_tokens_s", "TorchTrainer tokens/s", "{:.0f}", PEER_TRAIN),
    Row(
        "train_mfu",
        "TorchTrainer MFU (6·N_matmul, no attention)",
        "{:.1%}",
        MFU_GOAL_1_5B,
        at_least(GOAL_MFU_1_5B, "1.5B"),
    ),
    Row("train_mfu_attn", "TorchTrainer MFU incl. attention FLOPs", "{:.1%}"),
    Row("train_peak_gib", "TorchTrainer memory high-water mark, GiB", "{:.1f}"),
    *trainer_rows(
        "torch_x6head",
        "TorchTrainer tokens/s, FP32-accurate head on tensor cores (bf16x6)",
        "TorchTrainer MFU, bf16 body + FP32-accurate head (bf16x6, fused, chunked)",
        "memory high-water mark, bf16x6 head, GiB",
        goal=MFU_GOAL,
        check=at_least(GOAL_MFU),
    ),
    *trainer_rows(
        "torch_x6head_compiled",
        "TorchTrainer tokens/s, bf16x6 head, body compiled",
        "TorchTrainer MFU, bf16x6 head, body compiled (torch.compile)",
        "memory high-water mark, compiled, GiB",
        goal=MFU_GOAL,
        check=at_least(GOAL_MFU),
    ),
    *trainer_rows(
        "torch_x6head_auto",
        "TorchTrainer tokens/s, bf16x6 head, micro-batch from free memory",
        "TorchTrainer MFU, bf16x6 head, micro-batch from free memory",
        "memory high-water mark, micro-batch from free memory, GiB",
    ),
    *trainer_rows(
        "torch_bf16head",
        "TorchTrainer tokens/s, FP32 head on bf16 operands",
        "TorchTrainer MFU, FP32 head on bf16 operands (precision.lm_head_operands)",
        goal=MFU_GOAL_1_5B,
        check=at_least(GOAL_MFU_1_5B, "1.5B"),
    ),
    *trainer_rows(
        "torch_bf16head_nocudnn",
        "TorchTrainer tokens/s, bf16 head, no cuDNN attention",
        "TorchTrainer MFU, bf16 head, no cuDNN attention",
    ),
    Row("train_mfu_ceiling_fp32_head", "MFU ceiling with an fp32-rate LM head", "{:.1%}"),
    *trainer_rows(
        "torch_fulllogits",
        "TorchTrainer tokens/s, whole float32 logits (no chunking)",
        "TorchTrainer MFU, whole float32 logits (no chunking)",
    ),
    *(
        row
        for stage in (1, 2, 3)
        for row in trainer_rows(
            f"zero{stage}",
            f"DeepSpeed ZeRO-{stage} tokens/s",
            f"DeepSpeed ZeRO-{stage} MFU (bf16x6 head, whole logits)",
            f"DeepSpeed ZeRO-{stage} memory high-water mark, GiB",
        )
    ),
    Row(
        "sync_shared_s",
        "weight sync s, SharedWeights (publish → generator loaded)",
        "{:.3g}",
        f"< {GOAL_SYNC_S_0_5B} s at 0.5B; {PEER_SYNC}",
        lambda col, v: v < GOAL_SYNC_S_0_5B if col == "0.5B" else None,
    ),
    Row("sync_shared_publish_s", "of which trainer-side publish, s", "{:.3g}"),
    Row("sync_collective_s", "weight sync s, CollectiveWeights (NCCL; gloo on CPU)", "{:.3g}", PEER_SYNC),
    Row("engine_step_s", "Engine seconds/step (first and last step excluded)", "{:.3g}"),
    Row("engine_tokens_s", "Engine sampled tokens/s", "{:.0f}", PEER_E2E),
    Row("engine_sync_step_s", "Engine seconds/step, sync (one batch, one step)", "{:.3g}"),
    Row("engine_sync_tokens_s", "Engine sampled tokens/s, sync", "{:.0f}"),
    Row("engine_speedup", "PipelineRL-8 speed-up over sync (s/step ratio)", "{:.2f}", PEER_ASYNC),
)

#: Metrics every complete run has (the smoke test checks them); the DeepSpeed and collective rows are optional.
REQUIRED = (
    "peak_bf16_tflops",
    "peak_fp32_tflops",
    "bandwidth_gbs",
    "decode_bound_tokens_s",
    "decode_bound_fp32_head_tokens_s",
    "gen_b1_tokens_s",
    "gen_b1_fraction_of_bound",
    "gen_peak_tokens_s",
    "gen_peak_batch",
    "train_tokens_s",
    "train_mfu",
    "train_mfu_attn",
    "train_tokens_s_torch_bf16head",
    "train_mfu_torch_bf16head",
    "train_tokens_s_torch_x6head",
    "train_mfu_torch_x6head",
    "train_tokens_s_torch_x6head_compiled",
    "train_mfu_torch_x6head_compiled",
    "train_tokens_s_torch_x6head_auto",
    "train_mfu_torch_x6head_auto",
    "train_mfu_ceiling_fp32_head",
    "sync_shared_s",
    "sync_shared_publish_s",
    "engine_step_s",
    "engine_tokens_s",
    "engine_sync_step_s",
    "engine_sync_tokens_s",
    "engine_speedup",
)


def table(res: Results) -> str:
    meta = res.meta
    cpu = meta.get("measured_on") == "cpu"
    cols = list(meta["columns"])
    heads = [f"{c} ({meta['presets'][c]}){' [CPU]' if cpu else ''}" for c in cols]
    lines = []
    if cpu:
        lines.append("**CPU smoke check: every number below was measured on the CPU; none is a GPU measurement.**")
        lines.append("")
    lines.append(f"| metric | {' | '.join(heads)} | goal | met? |")
    lines.append("|---|" + "---|" * len(cols) + "---|---|")
    for row in ROWS:
        values = res.metrics.get(row.key, {})
        if not values and row.key not in res.skipped:
            continue
        cells, met = [], []
        for c in cols:
            v = values.get(c)
            cells.append("—" if v is None else row.fmt.format(v))
            verdict = None if v is None else row.check(c, v)
            if verdict is not None:
                met.append(("yes" if verdict else "no") + (f" ({c})" if len(cols) > 1 else ""))
        verdict_text = ", ".join(met) if met else ""
        if cpu and verdict_text:
            verdict_text = "n/a (CPU)"
        if not values:
            verdict_text = f"skipped: {res.skipped[row.key]}"
        lines.append(f"| {row.label} | {' | '.join(cells)} | {row.goal} | {verdict_text} |")
    lines.append("")
    shown = {row.key for row in ROWS}
    for name, reason in res.skipped.items():
        if name not in shown:
            lines.append(f"not measured: {name}: {reason}  ")
    lines.append(
        f"device: {meta['device_name']} · torch {meta['torch']} · CUDA {meta['cuda']} · transformers "
        f"{meta['transformers']} · deepspeed {meta['deepspeed']} · {meta['date']} · {meta['mode']}"
    )
    return "\n".join(lines)


# ---- main ---------------------------------------------------------------------------------------------------


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def metadata(device: torch.device, s: Sizes, smoke: bool) -> dict[str, Any]:
    import transformers

    ds = None
    if importlib.util.find_spec("deepspeed") is not None:
        from importlib.metadata import version

        ds = version("deepspeed")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU: {cpu_name()}, {os.cpu_count()} cores"
    return {
        "device": str(device),
        "device_name": name,
        "measured_on": device.type,
        "smoke": smoke,
        "mode": "CPU smoke check (not GPU numbers)" if device.type == "cpu" else "GPU measurement",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "deepspeed": ds or "not installed",
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "date": datetime.date.today().isoformat(),
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "columns": list(s.models),
        "presets": dict(s.models),
        "sizes": {k: v for k, v in s.__dict__.items() if k != "models"},
    }


#: Where ``--json`` writes; rewritten after every section, so a run killed at a time limit keeps what it measured.
JSON_PATH: Path | None = None


def save(res: Results) -> None:
    if JSON_PATH is not None:
        JSON_PATH.write_text(json.dumps(res.to_json(), indent=1, default=str) + "\n")


@contextlib.contextmanager
def section(res: Results, name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    except Exception as exc:
        res.skip(name, f"failed: {type(exc).__name__}: {exc}".splitlines()[0])
        traceback.print_exc()
        free_memory()
    res.details.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 2)
    save(res)


def run_all(args: argparse.Namespace) -> Results:
    smoke = bool(args.smoke)
    s = SMOKE if smoke else FULL
    if args.models:
        wanted = {m.strip().lower() for m in args.models.split(",")}
        s = Sizes(**{**s.__dict__, "models": {c: p for c, p in s.models.items() if c.lower() in wanted}})
        if not s.models:
            raise SystemExit(f"--models: none of {sorted(wanted)} in {list((SMOKE if smoke else FULL).models)}")
    only = set(SECTIONS) if not args.only else {x.strip() for x in args.only.split(",")}
    if only - set(SECTIONS):
        raise SystemExit(f"--only: unknown sections {sorted(only - set(SECTIONS))} (known: {', '.join(SECTIONS)})")
    trainers = DEFAULT_TRAINERS + OPTIONAL_TRAINERS
    if args.trainers:
        trainers = tuple(t.strip() for t in args.trainers.split(","))
        if set(trainers) - set(HEAD_OPERANDS):
            raise SystemExit(
                f"--trainers: unknown {sorted(set(trainers) - set(HEAD_OPERANDS))} (known: {list(HEAD_OPERANDS)})"
            )
    if smoke:
        device = torch.device("cpu")
    elif not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible: run with --smoke for the CPU check (its numbers are not GPU numbers)")
    else:
        device = torch.device("cuda:0")
    torch.set_num_threads(s.threads if smoke else max(1, min(16, os.cpu_count() or 1)))
    res = Results(meta=metadata(device, s, smoke))
    log(f"scalerl GPU benchmark on {res.meta['device_name']} ({res.meta['mode']}), torch {torch.__version__}")
    if "peak" in only:
        with section(res, "peak"):
            measure_peaks(res, device, s)
    for i, (col, preset) in enumerate(s.models.items()):
        optional = (s.optional_every_model or i == 0) and not args.no_deepspeed
        if "gen" in only:
            with section(res, f"gen[{col}]"):
                measure_generation(res, col, preset, device, s)
        model = None
        if "train" in only:
            with section(res, f"train[{col}]"):
                model = measure_trainers(res, col, preset, device, s, optional=optional, trainers=trainers)
        if "sync" in only:
            with section(res, f"sync[{col}]"):
                measure_shared_sync(res, col, preset, device, model, s)
            if optional:
                with section(res, f"sync_collective[{col}]"):
                    measure_collective_sync(res, col, preset, device, model, s)
        del model
        free_memory()
    if "engine" in only and s.engine_model in s.models.values():
        for mode in ENGINE_MODES:
            with section(res, f"engine[{mode}]"):
                measure_engine(res, device, s, mode)
    return res


def merge(paths: list[str]) -> Results:
    """One result from split runs (e.g. ``--models 0.5b`` and ``--models 1.5b`` on a time-limited machine)."""
    res = Results()
    for p in paths:
        doc = json.loads(Path(p).read_text())
        if not res.meta:
            res.meta = dict(doc["meta"])
        else:
            for c in doc["meta"]["columns"]:
                if c not in res.meta["columns"]:
                    res.meta["columns"].append(c)
                res.meta["presets"][c] = doc["meta"]["presets"][c]
        for k, cols in doc["metrics"].items():
            res.metrics.setdefault(k, {}).update(cols)
        res.skipped.update(doc["skipped"])
        res.details.setdefault("merged", []).append({"path": p, "details": doc["details"]})
    order = [c for c in FULL.models if c in res.meta["columns"]]
    res.meta["columns"] = order + [c for c in res.meta["columns"] if c not in order]
    res.skipped = {k: v for k, v in res.skipped.items() if k not in res.metrics}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny models and sizes: tests the code paths")
    ap.add_argument("--json", help="write the raw numbers (metrics, skipped rows, details, metadata) here")
    ap.add_argument("--models", help="comma-separated columns to run: 0.5b,1.5b (default both)")
    ap.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)} (default all)")
    ap.add_argument("--no-deepspeed", action="store_true", help="skip the DeepSpeed and collective rows (time)")
    ap.add_argument(
        "--trainers",
        help=f"comma-separated trainer rows (default {','.join(DEFAULT_TRAINERS + OPTIONAL_TRAINERS)}; "
        f"known: {','.join(HEAD_OPERANDS)})",
    )
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="print one table from the JSON files of split runs")
    args = ap.parse_args()
    global JSON_PATH
    JSON_PATH = Path(args.json) if args.json else None
    res = merge(args.merge) if args.merge else run_all(args)
    save(res)
    print()
    print(table(res))


if __name__ == "__main__":
    main()
