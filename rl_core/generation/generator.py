"""Batched torch sampling loop with a KV cache, length control and in-flight weight updates.

One ``Generator`` wraps a causal LM (HF ``PreTrainedModel``; CPU or CUDA). ``generate(problems, n)`` returns
``n`` rollouts per problem, grouped (problem 0's n samples, then problem 1's, ...). The loop:

1. poll ``weights()`` once, left-pad the prompts, prefill them into a fresh ``DynamicCache``;
2. per decode step, for every unfinished row: feed the next pending injected token (log-prob 0.0) if the
   length controller asked for an injection, else sample from the last logits (temperature / top-p from
   ``recipe.sampling``) and tell the controller (``rl_core.algorithms.make_length_controller``);
3. rows whose controller is done, or that hit the hard cap, leave the batch (their KV rows are dropped);
4. poll ``weights()``: if it returns ``(version, tensors)`` the tensors are copied into the model in place
   (same storage, the KV cache is kept) and later logits come from the new weights over the stale cache —
   PipelineRL's in-flight update; then one forward of the fed tokens for the remaining rows.

Two decode paths compute the same samples (tested): ``decode="static"`` (``static.py``; the default on CUDA for
Llama/Qwen2 models) keeps every row in place in a preallocated KV cache with finished rows masked, prompt widths
bucketed, so each decode step has one shape and can be compiled / CUDA-graph captured (``compile``: ``auto`` is a
CUDA graph of the eager step on CUDA, the eager step on the CPU); ``decode="dynamic"`` is the HF forward over a
``DynamicCache`` described above: the default on the CPU, where dropping finished rows measured faster on the
demo (its responses end at ~25 of 64 tokens; the static eager step is faster only while rows run to the cap), and
for every other architecture. Measurements: docs/benchmarks.md. Sampling draws one uniform per row of the whole
batch at each sampling event (``sampling.sample_with_uniforms``), so which rows are still running never changes
another row's sample.

Invariants: every response token carries the version of the weights whose logits produced it, and the
log-prob of that token under those logits (float32; through the FP32 head when the model has one). With
fixed weights the log-probs equal ``token_logprobs`` of the finished sequences up to float tolerance (tested).
Generation is deterministic given the seed, the prompts and the weight schedule.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

import torch
from torch import Tensor, nn
from transformers import DynamicCache, PreTrainedTokenizerBase

from rl_core.algorithms.fp32_head import position_ids_from_mask
from rl_core.algorithms.length import ForcedInterruption, TokenBudget
from rl_core.generation.attention import decode_attention
from rl_core.generation.base import BaseGenerator, GenerationStats, WeightSource, require_positive
from rl_core.generation.codec import response_cap
from rl_core.generation.rollout import ResponseRow, Rollout
from rl_core.generation.sampling import sample_with_uniforms
from rl_core.generation.static import DecodeMode, StaticDecoder, bucket, supports_static
from rl_core.generation.weights import WeightLoader
from rl_core.recipe import Recipe
from rl_core.tasks.base import Problem

__all__ = ["GenerationStats", "Generator", "WeightSource"]


class _Row(ResponseRow):
    """Per-sequence state of one response in the batch: the shared row plus the injected tokens still to feed."""

    __slots__ = ("pending",)

    def __init__(self, ctl: ForcedInterruption | TokenBudget) -> None:
        super().__init__(ctl)
        self.pending: deque[int] = deque()


class Generator(BaseGenerator):
    """Samples rollouts from ``model`` with the recipe's sampling and length settings (see module doc)."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        recipe: Recipe,
        *,
        device: torch.device | str | None = None,
        max_new_tokens: int | None = None,
        seed: int = 0,
        stop_token_ids: Sequence[int] = (),
        batch_size: int | None = None,
        use_chat_template: bool = False,
        decode: Literal["auto", "dynamic", "static"] = "auto",
        compile: Literal["auto", "eager", "inductor", "graph", "inductor-graph"] = "auto",
    ) -> None:
        require_positive(max_new_tokens=max_new_tokens, batch_size=batch_size)
        super().__init__(tokenizer, recipe, max_new_tokens, seed, stop_token_ids, use_chat_template)
        self.model = model
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.batch_size = batch_size
        self.use_chat_template = use_chat_template
        self.decode_mode = decode
        self.compile_mode = compile
        self._decoders: dict[tuple[int, int], StaticDecoder] = {}
        self._torch_rng = torch.Generator(device=self.device).manual_seed(seed)
        self._loader = WeightLoader(model)
        self.pad_id = self.codec.pad_id

    # -- weights --------------------------------------------------------------------------------------------

    def load_weights(self, version: int, state: Mapping[str, Tensor]) -> None:
        """Copy ``state`` into the model in place and make ``version`` the current policy version."""
        self._loader.load(state)
        for dec in self._decoders.values():
            dec.refresh()
        self.version = int(version)
        self.stats.weight_updates += 1

    # -- state --------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Sampling RNG states and the policy version (for checkpoints; ``torch.save``-able)."""
        return {
            "torch_rng": self._torch_rng.get_state(),
            "python_rng": self._rng.getstate(),
            "version": self.version,
        }

    def reseed(self, seed: int) -> None:
        """Sampling RNGs as a fresh ``Generator(..., seed=seed)`` has them (compiled decode steps are kept)."""
        self._rng = random.Random(seed)
        self._torch_rng.manual_seed(seed)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``state_dict()``: the next ``generate`` samples exactly what it would have then."""
        self._torch_rng.set_state(state["torch_rng"])
        self._rng.setstate(state["python_rng"])
        self.version = int(state["version"])

    # -- generation -----------------------------------------------------------------------------------------

    def _sample(
        self, prompts: Sequence[Problem], n: int, encoded: list[list[int]], weights: WeightSource | None
    ) -> list[Rollout]:
        """Every (problem, sample) job, in chunks of ``batch_size`` rows (one batch when unset)."""
        jobs = [(pi, si) for pi in range(len(prompts)) for si in range(n)]
        chunk = self.batch_size or max(len(jobs), 1)
        rollouts: list[Rollout] = []
        for lo in range(0, len(jobs), chunk):
            part = jobs[lo : lo + chunk]
            with decode_attention(self.device):  # no per-key-length cuDNN plan builds (generation/attention.py)
                rows = self._run([encoded[pi] for pi, _ in part], weights)
            for (pi, si), row in zip(part, rows, strict=True):
                text = self.decode(row.ids)
                rollouts.append(
                    row.to_rollout(
                        problem_id=prompts[pi].id, prompt_ids=encoded[pi], text=text, prompt_index=pi, sample_index=si
                    )
                )
        return rollouts

    def _forward(self, **kwargs: Any) -> Tensor:
        self.stats.forward_passes += 1
        out = self.model(**kwargs, use_cache=True, logits_to_keep=1)
        return cast(Tensor, out.logits[:, -1, :])

    @staticmethod
    def _advance(
        rows: list[_Row],
        active: Sequence[int],
        tok_list: Sequence[int],
        lp_list: Sequence[float],
        version: int,
        caps: list[int],
    ) -> list[int]:
        """Bookkeeping of one sampling event for the rows ``active`` (row indices; ``tok_list``/``lp_list`` indexed by
        position in ``active``): pending injections win over samples, the length controller sees sampled tokens,
        rows that end are marked done. Returns the token each row feeds next."""
        feed: list[int] = []
        for b, ri in enumerate(active):
            row = rows[ri]
            if row.pending:
                tok, lp, inj = row.pending.popleft(), 0.0, True
            else:
                tok, lp, inj = int(tok_list[b]), float(lp_list[b]), False
                step = row.ctl.observe(tok)
                row.pending.extend(step.inject)
            row.append(tok, lp, version, inj)
            if (row.ctl.done and not row.pending) or len(row.ids) >= caps[ri]:
                row.finish()
            feed.append(tok)
        return feed

    def _uniforms(self, rows: int) -> Tensor:
        """One uniform per row of the whole batch: drawn at every sampling event whatever the rows' state, so the
        dynamic and static paths consume the same random stream (sampling.py)."""
        return torch.rand(rows, generator=self._torch_rng, device=self.device)

    def _left_pad(self, prompt_ids: Sequence[list[int]], width: int) -> tuple[Tensor, Tensor]:
        ids = torch.full((len(prompt_ids), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(prompt_ids), width), dtype=torch.long)
        for i, p in enumerate(prompt_ids):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[i, width - len(p) :] = 1
        return ids.to(self.device), attn.to(self.device)

    @torch.inference_mode()
    def _run(self, prompt_ids: Sequence[list[int]], weights: WeightSource | None) -> list[_Row]:
        rows = [_Row(self.codec.controller(self._rng)) for _ in prompt_ids]
        caps = [response_cap(r.ctl, self.max_new_tokens) for r in rows]
        if self._use_static():
            return self._run_static(rows, caps, prompt_ids, weights)
        return self._run_dynamic(rows, caps, prompt_ids, weights)

    def _run_dynamic(
        self, rows: list[_Row], caps: list[int], prompt_ids: Sequence[list[int]], weights: WeightSource | None
    ) -> list[_Row]:
        """HF forward over a ``DynamicCache``; rows that finish leave the batch."""
        sampling = self.recipe.sampling
        ids, attn = self._left_pad(prompt_ids, max(len(p) for p in prompt_ids))
        positions = position_ids_from_mask(attn)
        self._poll(weights)
        cache = DynamicCache()
        logits = self._forward(input_ids=ids, attention_mask=attn, position_ids=positions, past_key_values=cache)
        logits_version = self.version
        next_pos = positions[:, -1] + 1
        active = list(range(len(rows)))  # batch position -> row index
        index = torch.arange(len(rows), device=self.device)
        while active:
            u = self._uniforms(len(rows))[index]
            tokens, logps = sample_with_uniforms(logits, u, temperature=sampling.temperature, top_p=sampling.top_p)
            feed = self._advance(rows, active, tokens.tolist(), logps.tolist(), logits_version, caps)
            keep = [b for b, ri in enumerate(active) if not rows[ri].done]
            if not keep:
                break
            if len(keep) < len(active):
                sel = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(sel)
                attn, next_pos, index = attn[sel], next_pos[sel], index[sel]
                active = [active[b] for b in keep]
                feed = [feed[b] for b in keep]
            self._poll(weights)
            attn = torch.cat([attn, attn.new_ones((attn.shape[0], 1))], dim=1)
            step_ids = torch.tensor(feed, dtype=torch.long, device=self.device).unsqueeze(1)
            logits = self._forward(
                input_ids=step_ids, attention_mask=attn, position_ids=next_pos.unsqueeze(1), past_key_values=cache
            )
            logits_version = self.version
            next_pos = next_pos + 1
        return rows

    # -- static-shape decoding ---------------------------------------------------------------------------------

    def _use_static(self) -> bool:
        if self.decode_mode == "dynamic" or (self.decode_mode == "auto" and self.device.type != "cuda"):
            return False
        ok = supports_static(self.model)
        if self.decode_mode == "static" and not ok:
            raise ValueError(f"decode='static' does not support {type(self.model).__name__}")
        return ok

    def _static_mode(self) -> DecodeMode:
        if self.compile_mode != "auto":
            return self.compile_mode
        return "graph" if self.device.type == "cuda" else "eager"

    def _decoder(self, batch: int, cache_len: int) -> StaticDecoder:
        """The static decoder of this (batch, cache length), built (and compiled / captured) once; at most two kept."""
        key = (batch, cache_len)
        dec = self._decoders.pop(key, None)
        if dec is None:
            while len(self._decoders) >= 2:
                self._decoders.pop(next(iter(self._decoders)))
            sampling = self.recipe.sampling
            dec = StaticDecoder(
                self.model,
                batch=batch,
                cache_len=cache_len,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                mode=self._static_mode(),
            )
        self._decoders[key] = dec  # most recently used last
        return dec

    def _run_static(
        self, rows: list[_Row], caps: list[int], prompt_ids: Sequence[list[int]], weights: WeightSource | None
    ) -> list[_Row]:
        """Own forward over a preallocated cache; finished rows stay in place (their samples are ignored). Prompt
        width bucketed to 8, cache length to the prompt limit plus the largest cap (bucketed to 64), so every batch of
        one size reuses one compiled / captured decode step."""
        sampling = self.recipe.sampling
        width = bucket(max(len(p) for p in prompt_ids), 8)
        cache_len = bucket(max(width, self.codec.max_prompt_tokens), 8) + bucket(max(caps), 64)
        dec = self._decoder(len(rows), cache_len)
        ids, attn = self._left_pad(prompt_ids, width)
        self._poll(weights)
        self.stats.forward_passes += 1
        logits = dec.prefill(ids, attn)
        logits_version = self.version
        tokens, logps = sample_with_uniforms(
            logits, self._uniforms(len(rows)), temperature=sampling.temperature, top_p=sampling.top_p
        )
        everyone = list(range(len(rows)))
        feed = [self.pad_id] * len(rows)
        slot = width
        while True:
            active = [ri for ri in everyone if not rows[ri].done]
            tok_all, lp_all = tokens.tolist(), logps.tolist()
            tok_list = [tok_all[ri] for ri in active]
            lp_list = [lp_all[ri] for ri in active]
            fed = self._advance(rows, active, tok_list, lp_list, logits_version, caps)
            for ri, tok in zip(active, fed, strict=True):
                feed[ri] = tok
            if all(r.done for r in rows):
                break
            self._poll(weights)
            self.stats.forward_passes += 1
            tokens, logps, _ = dec.step(torch.tensor(feed, dtype=torch.long), slot, self._uniforms(len(rows)))
            logits_version = self.version
            slot += 1
        return rows
