"""The trainer's model: built from the run config (optionally from the cached supervised base checkpoint).

Master weights are float32 on the run's device (reduced precision is autocast, ``trainer.autocast_dtype``); the
FP32 LM head follows the recipe. The FLOPs estimate per token uses the model config
(``rl_core.generation.decoder_flops_per_token``, attention at zero context: a lower bound).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rl_core.contracts.run_config import RunConfig
from rl_core.generation import decoder_flops_per_token
from rl_core.models import ModelConfig, build_model, build_tokenizer


def resolve_model_config(cfg: RunConfig, log: Callable[[str], None] | None = None) -> ModelConfig:
    """The model config the run trains: the configured one, or the base checkpoint it warms up into."""
    if not cfg.base_checkpoint.enabled:
        return cfg.model
    from rl_core.models.base_checkpoint import build_base_checkpoint

    task = cfg.task
    if task.kind == "math":  # excluded by RunConfig's validator; kept for the type checker
        raise ValueError("base_checkpoint needs a synthetic task")
    path = build_base_checkpoint(
        cfg.model,
        task,
        seed=cfg.seed if cfg.base_checkpoint.seed is None else cfg.base_checkpoint.seed,
        cache_dir=cfg.base_checkpoint.cache_dir,
        sft=cfg.base_checkpoint.sft,
        demonstrations=cfg.base_checkpoint.demonstrations,
        log=log,
    )
    return ModelConfig.model_validate({"path": Path(path), "fp32_lm_head": cfg.model.fp32_lm_head})


def build_trainer_model(
    cfg: RunConfig, model_cfg: ModelConfig, *, device: torch.device | None = None
) -> tuple[nn.Module, Any]:
    """(model in train mode, tokenizer) for ``model_cfg`` (from ``resolve_model_config``), on ``device`` (default:
    the run's device; other data-parallel ranks pass theirs)."""
    tokenizer = build_tokenizer(model_cfg)
    model = build_model(
        model_cfg,
        tokenizer,
        device if device is not None else torch.device(cfg.device),
        dtype="float32",
        fp32_lm_head=cfg.recipe.precision.fp32_lm_head,
        lm_head_operands=cfg.recipe.precision.lm_head_operands,
    )
    model.train()
    return model, tokenizer


def forward_flops_per_token(model: nn.Module) -> float:
    return float(decoder_flops_per_token(model.config))
