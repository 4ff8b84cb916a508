"""Named recipes: ScaleRL and the paper's re-implementations of prevalent recipes.

Every preset shares the paper's budget-level settings (batch 48 × 16, lengths, optimiser) so that presets
differ only in algorithmic choices. Where the paper does not spell a re-implementation out, the choice
follows the recipe's own paper and is marked UNCONFIRMED in ``docs/algorithms.md`` (section "Presets").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rl_core.recipe.errors import Problem, RecipeError
from rl_core.recipe.model import Recipe
from rl_core.recipe.paths import apply_overrides

_BASE = Recipe()

#: Differences of each preset from ScaleRL (the defaults), as dotted-key overrides.
PRESET_OVERRIDES: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "scalerl": MappingProxyType({}),
        "deepseek-grpo": MappingProxyType(
            {
                "loss.type": "grpo",
                "loss.aggregation": "sample",
                "advantage.normalization": "group",
                "filters.zero_variance": "none",
                "curriculum.no_positive_resampling": False,
                "length.mode": "none",
                "precision.fp32_lm_head": False,
                "pipeline.mode": "ppo_off_policy",
            }
        ),
        "qwen-dapo": MappingProxyType(
            {
                "loss.type": "dapo",
                "loss.eps_high": 0.28,
                "loss.aggregation": "prompt",
                "advantage.normalization": "group",
                "filters.zero_variance": "dynamic_sampling",
                "curriculum.no_positive_resampling": False,
                "length.mode": "overlong_penalty",
                "precision.fp32_lm_head": False,
                "pipeline.mode": "ppo_off_policy",
            }
        ),
        "magistral": MappingProxyType(
            {
                "loss.type": "dapo",
                "loss.eps_high": 0.28,
                "loss.aggregation": "prompt",
                "advantage.normalization": "batch",
                "filters.zero_variance": "drop",
                "curriculum.no_positive_resampling": False,
                "length.mode": "overlong_penalty",
                "precision.fp32_lm_head": False,
                "pipeline.mode": "pipeline",
            }
        ),
        "minimax": MappingProxyType(
            {
                "loss.type": "cispo",
                "loss.aggregation": "prompt",
                "advantage.normalization": "group",
                "filters.zero_variance": "none",
                "curriculum.no_positive_resampling": False,
                "length.mode": "none",
                "precision.fp32_lm_head": True,
                "pipeline.mode": "ppo_off_policy",
            }
        ),
    }
)

#: Preset names, in a stable order (ScaleRL first).
PRESETS: tuple[str, ...] = tuple(PRESET_OVERRIDES)

_CACHE: dict[str, Recipe] = {}


def get_preset(name: str) -> Recipe:
    """The named preset as a validated Recipe; unknown names raise RecipeError listing the allowed names."""
    if name not in PRESET_OVERRIDES:
        raise RecipeError([Problem("preset", f"unknown preset {name!r}", PRESETS)])
    if name not in _CACHE:
        _CACHE[name] = apply_overrides(_BASE, PRESET_OVERRIDES[name])
    return _CACHE[name]
