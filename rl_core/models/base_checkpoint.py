"""The base checkpoint for RL demos: a short supervised warm-up on a synthetic task's worked demonstrations.

``build_base_checkpoint(model_cfg, task_cfg, seed=..., cache_dir=...)`` trains the model on
``<think>scratchpad</think>answer<eos>`` completions (loss on completion tokens only), measures its validation
pass rate with temperature-1 sampling, and saves it with ``save_pretrained`` (weights, config, tokenizer) so it
loads like any local HF model: ``ModelConfig(path=<returned dir>)``.

Invariants:
- Reproducible: the result depends only on (model config, task config, SFT config, seed) and the library
  versions; two builds with equal inputs on the same machine give bit-identical weights (tested).
- Cached: the directory is ``<cache_dir>/<key>``, key = sha256 of the canonical JSON of those inputs
  (``BASE_FORMAT`` included), default ``cache_dir`` = ``$SCALERL_HOME/cache/base`` (``~/.scalerl``). A
  directory with ``base.json`` is complete; it is built in a temporary directory and renamed into place, so an
  interrupted or concurrent build never leaves a half-written checkpoint under the key.
- The global torch RNG state is restored afterwards.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict
from torch import Tensor, nn

from rl_core.contracts.model_config import ModelConfig, SFTConfig
from rl_core.generation import Generator, evaluate
from rl_core.models.build import build_model, build_tokenizer
from rl_core.models.tokenizer import Tokenizer
from rl_core.recipe import Recipe, apply_overrides
from rl_core.tasks import THINK_END, SyntheticTask, SyntheticTaskConfig, build_task

__all__ = [
    "BASE_FORMAT",
    "BaseCheckpointInfo",
    "SFTConfig",
    "base_checkpoint_key",
    "build_base_checkpoint",
    "corrupt_answers",
    "default_cache_dir",
    "eval_recipe",
    "read_base_info",
    "scalerl_home",
    "sft_train",
]

#: Bumped when the warm-up procedure changes, so old cache entries are not reused.
BASE_FORMAT = 1
INFO_FILE = "base.json"


class BaseCheckpointInfo(BaseModel):
    """Contents of ``base.json``: what was built and how well it does."""

    model_config = ConfigDict(extra="forbid")

    key: str
    format: int
    seed: int
    model: dict[str, Any]
    task: dict[str, Any]
    sft: dict[str, Any]
    final_loss: float
    seconds: float
    pass_rate: float | None
    eval_prompts: int
    max_response_tokens: int
    torch_version: str


def scalerl_home() -> Path:
    """``$SCALERL_HOME`` or ``~/.scalerl``."""
    return Path(os.environ.get("SCALERL_HOME") or Path.home() / ".scalerl")


def default_cache_dir() -> Path:
    """``$SCALERL_HOME/cache/base``."""
    return scalerl_home() / "cache" / "base"


def base_checkpoint_key(model_cfg: ModelConfig, task_cfg: SyntheticTaskConfig, sft: SFTConfig, seed: int) -> str:
    """16-hex-char cache key of the inputs that determine the checkpoint."""
    doc = {
        "format": BASE_FORMAT,
        "model": model_cfg.model_dump(mode="json"),
        "task": task_cfg.model_dump(mode="json"),
        "sft": sft.model_dump(mode="json", exclude={"threads", "eval_prompts"}),
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def corrupt_answers(pairs: Sequence[tuple[str, str]], rate: float, *, seed: int) -> list[tuple[str, str]]:
    """Replace one digit of the answer (the text after the last ``</think>``) by a different random digit in a
    ``rate`` share of the pairs (seeded; answers without digits are left alone)."""
    rng = random.Random(f"{seed}:answer-noise")
    out: list[tuple[str, str]] = []
    for prompt, completion in pairs:
        if rate > 0 and rng.random() < rate:
            cut = completion.rfind(THINK_END) + len(THINK_END) if THINK_END in completion else 0
            answer = completion[cut:]
            digits = [i for i, ch in enumerate(answer) if ch.isdigit()]
            if digits:
                i = rng.choice(digits)
                new = rng.choice([d for d in "0123456789" if d != answer[i]])
                completion = completion[:cut] + answer[:i] + new + answer[i + 1 :]
        out.append((prompt, completion))
    return out


def _encode_pairs(tok: Tokenizer, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    eos = tok.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos token")
    if not pairs:
        return []
    prompts = tok([p for p, _ in pairs])["input_ids"]
    completions = tok([c for _, c in pairs], add_special_tokens=False)["input_ids"]
    return [(list(p), [*c, int(eos)]) for p, c in zip(prompts, completions, strict=True)]


def _batch(examples: Sequence[tuple[list[int], list[int]]], pad: int) -> tuple[Tensor, Tensor, Tensor]:
    """Right-padded ids, attention mask and labels (-100 outside completions)."""
    width = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, (p, c) in enumerate(examples):
        seq = p + c
        ids[i, : len(seq)] = torch.tensor(seq)
        attn[i, : len(seq)] = 1
        labels[i, len(p) : len(seq)] = torch.tensor(c)
    return ids, attn, labels


def _lr_factor(step: int, cfg: SFTConfig) -> float:
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(cfg.steps - cfg.warmup_steps, 1)
    progress = min((step - cfg.warmup_steps) / span, 1.0)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def sft_train(
    model: nn.Module,
    tok: Tokenizer,
    pairs: Sequence[tuple[str, str]],
    cfg: SFTConfig,
    *,
    seed: int,
    on_step: Callable[[int, float], None] | None = None,
) -> float:
    """Next-token cross-entropy on the completions of ``pairs``, batches drawn with replacement from a seeded
    RNG; returns the mean loss of the last 10% of steps (NaN if ``steps`` is 0)."""
    encoded = _encode_pairs(tok, pairs)
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()
    tail: list[float] = []
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = cfg.lr * _lr_factor(step, cfg)
        ids, attn, labels = _batch([encoded[rng.randrange(len(encoded))] for _ in range(cfg.batch_size)], pad)
        device = next(model.parameters()).device
        out = model(input_ids=ids.to(device), attention_mask=attn.to(device), labels=labels.to(device))
        loss = out.loss
        if not torch.isfinite(loss):
            raise FloatingPointError(f"SFT loss is {loss.item()} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = float(loss.item())
        if step >= cfg.steps - max(cfg.steps // 10, 1):
            tail.append(value)
        if on_step is not None:
            on_step(step, value)
    model.eval()
    return sum(tail) / len(tail) if tail else float("nan")


def eval_recipe(max_response_tokens: int) -> Recipe:
    """The recipe used to measure a base checkpoint: temperature 1, a plain token cap, float32."""
    return apply_overrides(
        Recipe(),
        {
            "length.mode": "none",
            "length.max_response_tokens": max_response_tokens,
            "precision.generator_dtype": "float32",
            "sampling.temperature": 1.0,
            "sampling.top_p": 1.0,
        },
    )


def build_base_checkpoint(
    model_cfg: ModelConfig,
    task_cfg: SyntheticTaskConfig,
    *,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    sft: SFTConfig | None = None,
    demonstrations: int = 20_000,
    log: Callable[[str], None] | None = None,
) -> Path:
    """The directory of the warmed-up checkpoint, built now or found in the cache (see module doc)."""
    sft = sft or SFTConfig()
    task = build_task(task_cfg)
    if not isinstance(task, SyntheticTask):
        raise ValueError(f"task.kind: a base checkpoint needs a synthetic task, not {task_cfg.kind!r}")
    key = base_checkpoint_key(model_cfg, task_cfg, sft, seed)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / key
    if (target / INFO_FILE).is_file():
        if log:
            log(f"base checkpoint {key}: cached at {target}")
        return target
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    threads = torch.get_num_threads()
    if sft.threads is not None:
        torch.set_num_threads(sft.threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            tok = build_tokenizer(model_cfg)
            model = build_model(model_cfg, tok, "cpu", dtype="float32", fp32_lm_head=False)
            pairs = corrupt_answers(task.demonstrations(demonstrations, seed=seed), sft.answer_noise, seed=seed)

            def progress(step: int, loss: float) -> None:
                if log and (step + 1) % max(sft.steps // 5, 1) == 0:
                    log(f"base checkpoint {key}: step {step + 1}/{sft.steps} loss {loss:.3f}")

            final_loss = sft_train(model, tok, pairs, sft, seed=seed, on_step=progress)
            longest = max(len(tok(c, add_special_tokens=False)["input_ids"]) for _, c in pairs[:2000])
            max_tokens = 2 * longest + 8
            pass_rate = None
            if sft.eval_prompts:
                gen = Generator(model, tok, eval_recipe(max_tokens), seed=seed)
                pass_rate = evaluate(gen, task, k=1, limit=sft.eval_prompts).pass_rate
        info = BaseCheckpointInfo(
            key=key,
            format=BASE_FORMAT,
            seed=seed,
            model=model_cfg.model_dump(mode="json"),
            task=task_cfg.model_dump(mode="json"),
            sft=sft.model_dump(mode="json"),
            final_loss=final_loss,
            seconds=round(time.perf_counter() - started, 3),
            pass_rate=pass_rate,
            eval_prompts=min(sft.eval_prompts, len(task.problems("validation"))),
            max_response_tokens=max_tokens,
            torch_version=torch.__version__,
        )
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        try:
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            (tmp / INFO_FILE).write_text(info.model_dump_json(indent=2) + "\n")
            try:
                tmp.rename(target)
            except OSError:  # another process finished the same key first: keep theirs
                if not (target / INFO_FILE).is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        torch.set_num_threads(threads)
    if log:
        log(f"base checkpoint {key}: built in {info.seconds:.1f}s, loss {final_loss:.3f}, pass rate {pass_rate}")
    return target


def read_base_info(path: str | Path) -> BaseCheckpointInfo:
    """The ``base.json`` of a base checkpoint directory."""
    return BaseCheckpointInfo.model_validate_json((Path(path) / INFO_FILE).read_text())
