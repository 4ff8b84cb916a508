"""Held-out evaluation in the trainer process: mean@k pass rate of given weights.

The evaluator owns a separate model (the generator's dtype and head) into which it copies the weights to
evaluate, and one ``Generator`` reseeded per evaluation from (run seed, step) (the same state a fresh one would
have; kept so that the static decode step is compiled / captured once per run, not per evaluation), so an
evaluation is a pure function of (weights, step): a resumed run evaluates exactly as the uninterrupted one would.
Its wall time and tokens are returned for the ``eval`` compute role, never for training compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from rl_core.contracts.run_config import RunConfig
from rl_core.generation import EvalResult, Generator, evaluate
from rl_core.models import ModelConfig, build_model
from rl_core.recipe import apply_overrides


class Evaluator:
    def __init__(self, cfg: RunConfig, model_cfg: ModelConfig, task: Any, tokenizer: Any, device: torch.device) -> None:
        self.cfg = cfg
        self.task = task
        self.tokenizer = tokenizer
        recipe = cfg.recipe
        if cfg.eval.temperature is not None:
            recipe = apply_overrides(recipe, {"sampling.temperature": cfg.eval.temperature})
        self.recipe = recipe
        self.model = build_model(
            model_cfg,
            tokenizer,
            device,
            dtype=recipe.precision.generator_dtype,
            fp32_lm_head=recipe.precision.fp32_lm_head,
            lm_head_operands=recipe.precision.lm_head_operands,
        )
        self.device = device
        self._gen: Generator | None = None

    def evaluate(self, weights: Mapping[str, Tensor], *, step: int) -> EvalResult:
        seed = self.cfg.seed * 1_000_003 + 7919 * step + 1
        gen = self._gen
        if gen is None:
            gen = self._gen = Generator(
                self.model,
                self.tokenizer,
                self.recipe,
                device=self.device,
                max_new_tokens=self.cfg.generator.max_new_tokens,
                seed=seed,
                decode=self.cfg.generator.decode,
                compile=self.cfg.generator.compile,
            )
        gen.reseed(seed)
        gen.load_weights(step, {k: v for k, v in weights.items() if v.is_floating_point()})
        return evaluate(gen, self.task, split=self.cfg.eval.split, k=self.cfg.eval.k, limit=self.cfg.eval.prompts)
