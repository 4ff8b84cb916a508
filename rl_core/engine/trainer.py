"""Trainer backends: one optimiser step of the recipe's policy objective on a ``TrainBatch``.

Both backends share ``micro_batch_loss``: one full-sequence forward of a slice of rows, log pi of the response
tokens in float32 (the FP32 head when the recipe enables it), the registry loss with the generator's log-probs as
old log-probs, weighted by the batch-global ``token_weights`` slice. Summing micro-batch losses therefore gives
exactly the whole-batch loss and gradient, whatever ``micro_batch_size`` is.

Backends:
- ``TorchTrainer``: plain torch, AdamW + schedule + gradient clipping from the recipe (``rl_core.algorithms.optim``);
  optionally its decoder body compiled (``compile_backend``) and micro-batches sized from free memory
  (``micro_batch_size="auto"``, ``rl_core.engine.micro_batch``).
- ``DeepSpeedTrainer`` (``trainer_deepspeed.py``): the same objective under a DeepSpeed engine with a ZeRO stage.

Invariant: a step whose loss or gradient norm is not finite raises ``NonFiniteError`` before the optimiser
updates anything, and an update that leaves non-finite weights raises before they are published, so the
generator never samples from broken weights and the last checkpoint stays valid.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import Tensor, nn

from rl_core.algorithms.fp32_head import FP32LMHead, position_ids_from_mask
from rl_core.algorithms.fused_head import fused_head_logprobs
from rl_core.algorithms.losses import PolicyLossInputs
from rl_core.algorithms.objective import policy_objective
from rl_core.algorithms.optim import build_optimizer, build_scheduler, clip_gradients
from rl_core.contracts.records import as_metrics
from rl_core.engine.batch import TrainBatch
from rl_core.engine.length_buckets import length_buckets
from rl_core.engine.micro_batch import MicroBatchPlan, free_bytes, plan_micro_batch, shape_of
from rl_core.recipe.model import Recipe


class NonFiniteError(RuntimeError):
    """The loss or the gradient norm of a step was NaN or infinite."""


@dataclass(frozen=True)
class StepStats:
    loss: float
    grad_norm: float
    entropy: float
    clip_fraction: float
    ratio_mean: float
    ratio_max: float
    kl_mean: float
    tokens: int
    seconds: float
    lr: float

    def metrics(self) -> dict[str, float]:
        """Every field as ``train/<field>`` (``seconds`` as ``train/step_seconds``)."""
        return as_metrics(self, "train/", {"seconds": "step_seconds"})


class Trainer(Protocol):
    """What the engine needs from a backend."""

    version: int

    def step(self, batch: TrainBatch) -> StepStats: ...

    def weights(self) -> dict[str, Tensor]: ...

    def weight_items(self) -> Iterator[tuple[str, Tensor]]:
        """(state-dict name, full tensor) pairs for a weight sync; each tensor is valid only until the next item
        (ZeRO-3 gathers one parameter at a time)."""
        ...

    def save(self, directory: str) -> None: ...

    def load(self, directory: str) -> None: ...

    def close(self) -> None:
        """Release what the backend holds beyond this process (e.g. other ranks); idempotent."""
        ...


def micro_batches(rows: int, size: int | None) -> Iterator[slice]:
    """Contiguous row slices of at most ``size`` rows (all rows when None)."""
    step = rows if size is None else max(1, size)
    for start in range(0, rows, step):
        yield slice(start, min(rows, start + step))


@dataclass
class MicroResult:
    loss: Tensor
    entropy_sum: float
    n_tokens: int
    clip_fraction: float
    ratio_mean: float
    ratio_max: float
    kl_mean: float


def autocast_dtype(recipe: Recipe) -> torch.dtype | None:
    """The reduced dtype the trainer's forward runs in (None for float32); master weights stay float32."""
    name = recipe.precision.trainer_dtype
    return None if name == "float32" else cast(torch.dtype, getattr(torch, name))


#: Elements of float32 logits one chunk of the head may hold (512 MiB): tokens per chunk = this // vocabulary.
LOGIT_CHUNK_ELEMENTS = 1 << 27


def _chunkable(model: nn.Module) -> bool:
    """Whether the response log-probs can be computed from the base model's hidden states and the LM head
    (logits = head(final hidden state), nothing after the head): the Llama / Qwen2 family that static decoding
    supports, as a plain module (a DeepSpeed engine keeps the full path)."""
    from rl_core.generation.static import supports_static

    return isinstance(model, nn.Module) and not hasattr(model, "module") and supports_static(model)


def _head_logprobs(
    hidden: Tensor, targets: Tensor, head: nn.Module, temperature: float, dtype: torch.dtype | None
) -> tuple[Tensor, Tensor]:
    """log softmax(head(hidden) / T)[targets] and the entropy (detached) of one chunk of tokens; float32."""
    with torch.autocast(hidden.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        logits = cast(Tensor, head(hidden)).float()
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logprobs = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    with torch.no_grad():
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logprobs, entropy


def response_logprobs(
    model: nn.Module,
    ids: Tensor,
    attn: Tensor,
    batch: TrainBatch,
    recipe: Recipe,
    *,
    chunk_tokens: int | None = 0,
) -> tuple[Tensor, Tensor]:
    """(log pi of the response tokens [B, R] float32, differentiable; their entropy [B, R], detached).

    ``chunk_tokens`` 0 (default): chunked when the model allows it (``_chunkable``), ``LOGIT_CHUNK_ELEMENTS //
    vocabulary`` tokens per chunk; None: the full computation (one forward, the whole [B, T, V] logits); N: N
    tokens per chunk. Chunked: the base model's hidden states of the response positions go through the LM head
    (the recipe's FP32 head unchanged) a chunk of tokens at a time under activation checkpointing, so at most one
    chunk's float32 logits exist at once, forward or backward, and the head never runs on prompt positions. Equal
    to the full computation up to float32 rounding (tests/rl_core/engine/test_chunked_logprobs.py)."""
    dtype = autocast_dtype(recipe)
    temperature = recipe.sampling.temperature
    cols = batch.response_slice()
    targets = ids[:, batch.prompt_width : batch.prompt_width + batch.response_width]
    positions = position_ids_from_mask(attn)
    if chunk_tokens is None or not _chunkable(model):
        with torch.autocast(ids.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=False)
        logits = cast(Tensor, out.logits)[:, cols].float()
        if temperature != 1.0:
            logits = logits / temperature
        logp_all = F.log_softmax(logits, dim=-1)
        logprobs = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logprobs, entropy
    core = cast(Any, model)
    with torch.autocast(ids.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        hidden = core.model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=False)[0]
    head = core.get_output_embeddings()
    h = hidden[:, cols]
    rows, width = targets.shape
    flat_h, flat_t = h.reshape(rows * width, h.shape[-1]), targets.reshape(-1)
    n = flat_t.shape[0]
    size = chunk_tokens or max(1, LOGIT_CHUNK_ELEMENTS // int(head.weight.shape[0]))
    if isinstance(head, FP32LMHead):  # fused head + log-softmax, recomputed per chunk in backward
        lp, ent = fused_head_logprobs(
            flat_h, head.weight, head.bias, flat_t, scheme=head.scheme, temperature=temperature, chunk=size
        )
        return lp.view(rows, width), ent.view(rows, width)
    if size >= n:  # one chunk: nothing to save by checkpointing
        lp, ent = _head_logprobs(flat_h, flat_t, head, temperature, dtype)
        return lp.view(rows, width), ent.view(rows, width)
    lps, ents = [], []
    for start in range(0, n, size):
        part = slice(start, min(n, start + size))
        lp, ent = torch.utils.checkpoint.checkpoint(
            _head_logprobs, flat_h[part], flat_t[part], head, temperature, dtype, use_reentrant=False
        )
        lps.append(lp)
        ents.append(ent)
    return torch.cat(lps).view(rows, width), torch.cat(ents).view(rows, width)


def micro_batch_loss(
    model: nn.Module,
    batch: TrainBatch,
    rows: slice,
    recipe: Recipe,
    device: torch.device,
    *,
    chunk_tokens: int | None = 0,
) -> MicroResult:
    """The rows' share of the batch loss (differentiable) and their monitoring statistics (see module doc).
    ``chunk_tokens``: how the log-probs are computed (``response_logprobs``)."""
    ids = batch.input_ids[rows].to(device)
    attn = batch.attention_mask[rows].to(device)
    logprobs, entropy = response_logprobs(model, ids, attn, batch, recipe, chunk_tokens=chunk_tokens)
    mask = batch.mask[rows].to(device)
    entropy_sum = float((entropy * mask).sum())
    inputs = PolicyLossInputs(
        logprobs=logprobs,
        old_logprobs=batch.old_logprobs[rows].to(device),
        advantages=batch.advantages[rows].to(device),
        mask=mask,
    )
    res = policy_objective(recipe.loss, inputs, batch.weights[rows].to(device))
    return MicroResult(
        loss=res.loss,
        entropy_sum=entropy_sum,
        n_tokens=res.n_tokens,
        clip_fraction=res.clip_fraction,
        ratio_mean=res.ratio_mean,
        ratio_max=res.ratio_max,
        kl_mean=res.kl_mean,
    )


class StepAccumulator:
    """Combines micro-batch statistics into token-weighted step statistics. ``strict`` raises on a non-finite
    micro-batch loss at once; data-parallel ranks leave it off (one rank raising alone would leave the others
    waiting in a collective) and fail together on the reduced gradient norm instead."""

    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self.loss = 0.0
        self.entropy_sum = 0.0
        self.tokens = 0
        self.clip = 0.0
        self.ratio = 0.0
        self.kl = 0.0
        self.ratio_max = 0.0

    def add(self, r: MicroResult) -> None:
        loss = float(r.loss.detach())
        if self.strict and not math.isfinite(loss):
            raise NonFiniteError(f"non-finite loss {loss} in a micro-batch")
        self.loss += loss
        self.entropy_sum += r.entropy_sum
        self.tokens += r.n_tokens
        self.clip += r.clip_fraction * r.n_tokens
        self.ratio += r.ratio_mean * r.n_tokens
        self.kl += r.kl_mean * r.n_tokens
        self.ratio_max = max(self.ratio_max, r.ratio_max)

    def all_reduce(self, device: torch.device) -> None:
        """Sum (max for ``ratio_max``) the statistics over the default process group's ranks."""
        import torch.distributed as dist

        sums = torch.tensor(
            [self.loss, self.entropy_sum, float(self.tokens), self.clip, self.ratio, self.kl],
            dtype=torch.float64,
            device=device,
        )
        peak = torch.tensor([self.ratio_max], dtype=torch.float64, device=device)
        dist.all_reduce(sums)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        self.loss, self.entropy_sum, tokens, self.clip, self.ratio, self.kl = (float(x) for x in sums.tolist())
        self.tokens = round(tokens)
        self.ratio_max = float(peak.item())

    def stats(self, grad_norm: float, seconds: float, lr: float) -> StepStats:
        n = max(1, self.tokens)
        return StepStats(
            loss=self.loss,
            grad_norm=grad_norm,
            entropy=self.entropy_sum / n,
            clip_fraction=self.clip / n,
            ratio_mean=self.ratio / n if self.tokens else 1.0,
            ratio_max=self.ratio_max if self.tokens else 1.0,
            kl_mean=self.kl / n,
            tokens=self.tokens,
            seconds=seconds,
            lr=lr,
        )


def compile_body(model: nn.Module, backend: str | None) -> bool:
    """Compile the decoder body's forward (and so its backward) with ``torch.compile`` in place (``Module.compile``:
    parameters, state-dict keys and weight sharing unchanged); the LM head and the fused log-softmax stay eager.
    ``backend`` None: nothing compiled. Returns whether something was compiled."""
    if backend is None:
        return False
    body = getattr(model, "model", None) if _chunkable(model) else None
    target = body if isinstance(body, nn.Module) else model
    target.compile(backend=backend, dynamic=True)
    return True


def set_checkpointing(model: nn.Module, on: bool) -> None:
    """Activation checkpointing of a Hugging Face model's layers on or off (a no-op for other modules). Newer
    transformers name it ``activation_checkpointing``, older ``gradient_checkpointing``."""
    names = ("is_activation_checkpointing", "activation_checkpointing_enable", "activation_checkpointing_disable")
    if not hasattr(type(model), names[0]):
        names = ("is_gradient_checkpointing", "gradient_checkpointing_enable", "gradient_checkpointing_disable")
        if not hasattr(type(model), names[0]):
            return
    hf = cast(Any, model)
    if on and not getattr(hf, names[0]):
        getattr(hf, names[1])({"use_reentrant": False})  # the kwargs dict, positional in both names
    elif not on and getattr(hf, names[0]):
        getattr(hf, names[2])()


def check_finite_weights(model: nn.Module) -> None:
    """Raise ``NonFiniteError`` when any parameter holds NaN/inf (e.g. after a diverging update), so that
    such weights are never published to the generator."""
    with torch.no_grad():
        norms = [torch.linalg.vector_norm(p.detach().float()) for p in model.parameters()]
        if norms and not bool(torch.isfinite(torch.stack(norms)).all()):
            raise NonFiniteError("non-finite weights after the optimiser step")


class TorchTrainer:
    """Plain torch backend (see module doc). ``version`` counts completed optimiser steps."""

    def __init__(
        self,
        model: nn.Module,
        recipe: Recipe,
        *,
        device: torch.device,
        micro_batch_size: int | Literal["auto"] | None = None,
        version: int = 0,
        logprob_chunk_tokens: int | None = 0,
        compile_backend: str | None = None,
        bucket_overhead_tokens: int | None = None,
    ) -> None:
        self.model = model.to(device)
        # Micro-batches cut by length and trimmed of padding at this cost per forward (None: contiguous slices).
        self.bucket_overhead_tokens = bucket_overhead_tokens
        self.logprob_chunk_tokens = logprob_chunk_tokens  # ``response_logprobs``: 0 auto, None full, N per chunk
        self.model.train()
        self.recipe = recipe
        self.device = device
        self.micro_batch_size = micro_batch_size  # rows; None: the whole batch; "auto": from free memory
        self.plan: MicroBatchPlan | None = None  # the last "auto" plan
        self.version = version
        self.compiled = compile_body(self.model, compile_backend)
        self.optimizer = build_optimizer(self.model.parameters(), recipe.optimizer)
        self.scheduler = build_scheduler(self.optimizer, recipe.schedule)

    def _rows(self, batch: TrainBatch) -> int | None:
        """Rows per micro-batch for this batch (``micro_batch_size``; "auto": ``plan_micro_batch`` on the memory
        free now, with activation checkpointing switched on only when one row does not fit without it)."""
        if self.micro_batch_size != "auto":
            return self.micro_batch_size
        config = getattr(self.model, "config", None)
        if config is None:
            return None
        shape = shape_of(config)
        chunk = self.logprob_chunk_tokens or max(1, LOGIT_CHUNK_ELEMENTS // shape.vocab)
        self.plan = plan_micro_batch(
            free_bytes(self.device),
            shape,
            sequence=int(batch.input_ids.shape[1]),
            batch_rows=batch.rows,
            chunk_tokens=chunk,
        )
        set_checkpointing(self.model, self.plan.checkpointing)
        return self.plan.rows

    def _micro_batches(self, batch: TrainBatch) -> Iterator[tuple[TrainBatch, slice]]:
        """(batch, rows) of each forward/backward: trimmed length buckets, or contiguous slices of the batch."""
        size = self._rows(batch)
        if self.bucket_overhead_tokens is not None:
            for part in length_buckets(batch, size, self.bucket_overhead_tokens):
                yield part, slice(0, part.rows)
            return
        for rows in micro_batches(batch.rows, size):
            yield batch, rows

    def step(self, batch: TrainBatch) -> StepStats:
        t0 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        acc = StepAccumulator()
        for part, rows in self._micro_batches(batch):
            r = micro_batch_loss(
                self.model, part, rows, self.recipe, self.device, chunk_tokens=self.logprob_chunk_tokens
            )
            acc.add(r)
            r.loss.backward()  # type: ignore[no-untyped-call]
        grad_norm = clip_gradients(self.model.parameters(), self.recipe.optimizer)
        if not math.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            raise NonFiniteError(f"non-finite gradient norm {grad_norm}")
        lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.scheduler.step()
        check_finite_weights(self.model)
        self.version += 1
        return acc.stats(grad_norm, time.perf_counter() - t0, lr)

    def weights(self) -> dict[str, Tensor]:
        return self.model.state_dict()

    def weight_items(self) -> Iterator[tuple[str, Tensor]]:
        return iter(self.model.state_dict().items())

    def close(self) -> None:
        """Nothing to release: one process."""

    def save(self, directory: str) -> None:
        state: dict[str, Any] = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "version": self.version,
        }
        torch.save(state, f"{directory}/trainer.pt")

    def load(self, directory: str) -> None:
        state = torch.load(f"{directory}/trainer.pt", map_location=self.device, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.version = int(state["version"])
