"""Models: any Hugging Face causal LM from a local path, or a preset built from a config, and its tokenizer.

- ``ModelConfig`` (``path`` xor ``preset`` + shape overrides; ``dtype``; ``fp32_lm_head``), ``PRESETS``.
- ``build_tokenizer(config)``: the tokenizer saved with a local model, or the built-in character tokenizer.
- ``build_model(config, tokenizer, device, *, dtype, fp32_lm_head)``: never downloads.
- ``build_base_checkpoint(model_cfg, task_cfg, *, seed, cache_dir)``: supervised warm-up, cached by config hash.

Details: ``docs/engine-core.md``.
"""

from rl_core.contracts.model_config import PRESETS, ModelConfig, ModelDType, SFTConfig, preset_shape
from rl_core.models.base_checkpoint import (
    BaseCheckpointInfo,
    base_checkpoint_key,
    build_base_checkpoint,
    default_cache_dir,
    read_base_info,
    scalerl_home,
)
from rl_core.models.build import build_hf_config, build_model, build_tokenizer, torch_dtype
from rl_core.models.tokenizer import CHAR_VOCAB, Tokenizer, char_tokenizer, load_tokenizer

__all__ = [
    "CHAR_VOCAB",
    "PRESETS",
    "BaseCheckpointInfo",
    "ModelConfig",
    "ModelDType",
    "SFTConfig",
    "Tokenizer",
    "base_checkpoint_key",
    "build_base_checkpoint",
    "build_hf_config",
    "build_model",
    "build_tokenizer",
    "char_tokenizer",
    "default_cache_dir",
    "load_tokenizer",
    "preset_shape",
    "read_base_info",
    "scalerl_home",
    "torch_dtype",
]
