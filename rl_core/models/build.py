"""Build tokenizers and causal LMs from a ``ModelConfig`` without touching the network.

Invariants: a ``path`` model is loaded with ``local_files_only=True`` (a missing directory is a
``FileNotFoundError`` naming ``model.path``); a ``preset`` model is a fresh HF model (``LlamaForCausalLM`` or
``Qwen2ForCausalLM``) whose initial weights depend only on the config (``init_seed``), not on the global RNG,
which is left untouched. The returned model is in eval mode, on ``device``, in the requested dtype, with the
FP32 LM head if asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch
from torch import nn
from transformers import AutoModelForCausalLM, LlamaConfig, PretrainedConfig, PreTrainedModel, Qwen2Config

from rl_core.algorithms.fp32_head import HeadOperands, enable_fp32_lm_head
from rl_core.contracts.model_config import ModelConfig, ModelDType, preset_shape
from rl_core.models.tokenizer import Tokenizer, char_tokenizer, load_tokenizer

__all__ = ["build_hf_config", "build_model", "build_tokenizer", "torch_dtype"]

_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_dtype(name: ModelDType | str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16`` etc."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r} (allowed: {', '.join(_DTYPES)})") from None


def _check_path(path: Path) -> Path:
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model.path: {str(path)!r} is not a local Hugging Face model directory (no config.json)"
        )
    return path


def build_tokenizer(config: ModelConfig) -> Tokenizer:
    """The model's tokenizer: the one saved in ``path``, or the built-in character tokenizer for presets."""
    if config.path is not None:
        return load_tokenizer(_check_path(config.path))
    return char_tokenizer()


def build_hf_config(config: ModelConfig, tokenizer: Tokenizer) -> PretrainedConfig:
    """The HF config of a preset model (vocabulary sized to the tokenizer unless overridden)."""
    shape = preset_shape(config, vocab_size=len(tokenizer))
    arch = shape.pop("arch")
    if shape["vocab_size"] < len(tokenizer):
        raise ValueError(f"vocab_size ({shape['vocab_size']}) is smaller than the tokenizer ({len(tokenizer)})")
    special = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    cls = Qwen2Config if arch == "qwen2" else LlamaConfig
    return cls(**shape, **special)


def build_model(
    config: ModelConfig,
    tokenizer: Tokenizer,
    device: torch.device | str = "cpu",
    *,
    dtype: ModelDType | None = None,
    fp32_lm_head: bool | None = None,
    lm_head_operands: HeadOperands = "float32",
) -> PreTrainedModel:
    """A causal LM in eval mode on ``device``.

    ``dtype`` overrides ``config.dtype`` (e.g. the recipe's generator/trainer dtype). The FP32 LM head is on if
    ``config.fp32_lm_head`` says so, else if ``fp32_lm_head`` (the recipe's ``precision.fp32_lm_head``) does;
    ``lm_head_operands`` is its matmul operands' dtype (the recipe's ``precision.lm_head_operands``).
    """
    dt = torch_dtype(dtype or config.dtype)
    module: nn.Module
    if config.path is not None:
        module = AutoModelForCausalLM.from_pretrained(str(_check_path(config.path)), local_files_only=True, dtype=dt)
    else:
        hf_config = build_hf_config(config, tokenizer)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.init_seed)
            module = AutoModelForCausalLM.from_config(hf_config)  # type: ignore[no-untyped-call]
    module = module.to(device=device, dtype=dt)
    head = config.fp32_lm_head if config.fp32_lm_head is not None else bool(fp32_lm_head)
    if head:
        enable_fp32_lm_head(module, lm_head_operands)
    module.eval()
    return cast(PreTrainedModel, module)
