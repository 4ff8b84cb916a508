"""Recipes as typed data: the Recipe model, loading with clear errors, presets, leave-one-out and grids.

This package never imports torch (directly or indirectly): the server validates and expands recipes
without the training stack. Public API:

- ``Recipe`` and its sections; ``Recipe()`` is ScaleRL. The model is data only (no methods that reach into the
  other modules): ``apply_overrides(recipe, {dotted: value})``, ``recipe_to_dict``/``recipe_to_yaml``,
  ``recipe_digest``.
- ``load_recipe(mapping | yaml text | path)``; an optional top-level ``preset`` key starts from a preset.
- ``PRESETS``, ``get_preset(name)``.
- ``leave_one_out(recipe=None, extended=False) -> dict[name, Recipe]``.
- ``expand_grid(base, axes, seeds, max_runs) -> list[GridCell]``.
- Errors: ``RecipeError`` (``.problems`` of ``Problem(key, message, allowed)``), ``GridError``,
  ``GridTooLargeError``; all are ``ValueError`` subclasses.
"""

from rl_core.recipe.ablations import LEAVE_ONE_OUT, LeaveOneOut, leave_one_out, leave_one_out_overrides
from rl_core.recipe.errors import GridError, GridTooLargeError, Problem, RecipeError
from rl_core.recipe.grid import DEFAULT_MAX_RUNS, GridCell, cell_id, expand_grid
from rl_core.recipe.io import canonical_json, load_recipe, recipe_digest, recipe_to_dict, recipe_to_yaml
from rl_core.recipe.model import (
    INTERRUPTION_PHRASE,
    AdvantageConfig,
    BatchConfig,
    CurriculumConfig,
    FilterConfig,
    InterruptionConfig,
    LengthConfig,
    LossConfig,
    OptimizerConfig,
    OverlongConfig,
    PipelineConfig,
    PrecisionConfig,
    Recipe,
    RewardConfig,
    SamplingConfig,
    ScheduleConfig,
)
from rl_core.recipe.paths import apply_overrides, get_value
from rl_core.recipe.presets import PRESET_OVERRIDES, PRESETS, get_preset

__all__ = [
    "DEFAULT_MAX_RUNS",
    "INTERRUPTION_PHRASE",
    "LEAVE_ONE_OUT",
    "PRESETS",
    "PRESET_OVERRIDES",
    "AdvantageConfig",
    "BatchConfig",
    "CurriculumConfig",
    "FilterConfig",
    "GridCell",
    "GridError",
    "GridTooLargeError",
    "InterruptionConfig",
    "LeaveOneOut",
    "LengthConfig",
    "LossConfig",
    "OptimizerConfig",
    "OverlongConfig",
    "PipelineConfig",
    "PrecisionConfig",
    "Problem",
    "Recipe",
    "RecipeError",
    "RewardConfig",
    "SamplingConfig",
    "ScheduleConfig",
    "apply_overrides",
    "canonical_json",
    "cell_id",
    "expand_grid",
    "get_preset",
    "get_value",
    "leave_one_out",
    "leave_one_out_overrides",
    "load_recipe",
    "recipe_digest",
    "recipe_to_dict",
    "recipe_to_yaml",
]
