"""Model configs: a local Hugging Face checkpoint (``path``) or an architecture preset built from a config.

Invariants: exactly one of ``path`` / ``preset``; shape overrides only with a preset; every model forbids
unknown keys and is frozen, so a config is hashable data (the base-checkpoint cache key is its JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["PRESETS", "ModelConfig", "ModelDType", "preset_shape"]

ModelDType = Literal["float32", "bfloat16", "float16"]
Arch = Literal["llama", "qwen2"]

#: Architecture presets (HF config keys). ``vocab_size`` defaults to the tokenizer's size.
PRESETS: dict[str, dict[str, Any]] = {
    # ~0.1M parameters: CPU demo and tests.
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
        "tie_word_embeddings": True,
    },
    # ~0.8M parameters: a stronger CPU model.
    "small": {
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "tie_word_embeddings": True,
    },
    # The shape of Qwen2-0.5B (random init; GPU throughput/MFU runs), with its 151,936-token vocabulary.
    "qwen2-0.5b": {
        "arch": "qwen2",
        "vocab_size": 151_936,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32_768,
        "rope_theta": 1_000_000.0,
        "tie_word_embeddings": True,
    },
    # The shape of Qwen2-1.5B (random init; GPU throughput/MFU runs): 1.54B parameters with the tied embedding.
    "qwen2-1.5b": {
        "arch": "qwen2",
        "vocab_size": 151_936,
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32_768,
        "rope_theta": 1_000_000.0,
        "tie_word_embeddings": True,
    },
}

_SHAPE_KEYS = (
    "arch",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "rope_theta",
    "tie_word_embeddings",
)


class ModelConfig(BaseModel):
    """Which model to build.

    - ``path``: a local HF directory (``config.json`` + weights + tokenizer); loaded with
      ``local_files_only=True``, never downloaded.
    - ``preset``: a key of ``PRESETS`` with optional shape overrides; weights are randomly initialised from
      ``init_seed`` (the tokenizer is the built-in character tokenizer).
    - ``dtype``: parameter dtype. ``fp32_lm_head``: None follows the recipe's ``precision.fp32_lm_head``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path | None = None
    preset: Literal["tiny", "small", "qwen2-0.5b", "qwen2-1.5b"] | None = None
    arch: Arch | None = None
    vocab_size: int | None = Field(default=None, ge=8)
    hidden_size: int | None = Field(default=None, ge=8)
    intermediate_size: int | None = Field(default=None, ge=8)
    num_hidden_layers: int | None = Field(default=None, ge=1)
    num_attention_heads: int | None = Field(default=None, ge=1)
    num_key_value_heads: int | None = Field(default=None, ge=1)
    max_position_embeddings: int | None = Field(default=None, ge=16)
    rope_theta: float | None = Field(default=None, gt=0)
    tie_word_embeddings: bool | None = None
    dtype: ModelDType = "float32"
    fp32_lm_head: bool | None = None
    init_seed: int = 0

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.path is None) == (self.preset is None):
            raise ValueError("give exactly one of 'path' (a local HF model directory) or 'preset'")
        if self.path is not None:
            given = [k for k in _SHAPE_KEYS if getattr(self, k) is not None]
            if given:
                raise ValueError(f"shape overrides {given} need a 'preset', not a 'path'")
        else:
            shape = preset_shape(self, vocab_size=1)
            heads, kv, hidden = shape["num_attention_heads"], shape["num_key_value_heads"], shape["hidden_size"]
            if hidden % heads:
                raise ValueError(f"hidden_size ({hidden}) must be divisible by num_attention_heads ({heads})")
            if heads % kv:
                raise ValueError(f"num_attention_heads ({heads}) must be divisible by num_key_value_heads ({kv})")
        return self


def preset_shape(cfg: ModelConfig, *, vocab_size: int) -> dict[str, Any]:
    """The preset's shape with the config's overrides; ``vocab_size`` fills in when neither sets it."""
    if cfg.preset is None:
        raise ValueError("preset_shape needs a preset config")
    shape: dict[str, Any] = {"arch": "llama", "vocab_size": vocab_size, **PRESETS[cfg.preset]}
    for key in _SHAPE_KEYS:
        value = getattr(cfg, key)
        if value is not None:
            shape[key] = value
    return shape


class SFTConfig(BaseModel):
    """Supervised warm-up settings.

    ``answer_noise`` is the share of demonstrations whose final answer has one digit replaced by a different
    random digit (the worked scratchpad stays correct): the warm-up imitates an imperfect teacher, so the model
    learns the method but answers inconsistently with its own scratchpad, starting RL at a low pass rate from a
    *converged* model (a model stopped early in the steep part of its learning curve is fragile under RL).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    answer_noise: float = Field(default=0.8, ge=0, lt=1)
    steps: int = Field(default=600, ge=0)
    batch_size: int = Field(default=64, ge=1)
    lr: float = Field(default=3e-3, gt=0)
    warmup_steps: int = Field(default=20, ge=0)
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    weight_decay: float = Field(default=0.0, ge=0)
    eval_prompts: int = Field(default=200, ge=0)
    threads: int | None = Field(default=None, ge=1)
