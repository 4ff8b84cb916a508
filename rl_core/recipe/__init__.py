"""Recipes as typed data: the Recipe model, loading with clear errors, presets, leave-one-out and grids.

This package never imports torch (directly or indirectly): the server validates and expands recipes
without the training stack. Public API:

- ``Recipe`` and its sections; ``Recipe()`` is ScaleRL. The model is data only (no methods that reach into the
  other modules): ``apply_overrides(recipe, {dotted: value})``, ``recipe_to_dict``/``recipe_to_yaml``,
  ``recipe_digest``; ``recipe_overrides(base, recipe)`` is the fewest dotted overrides from one to the other.
- ``loss`` is tagged by ``loss.type``: ``LossConfig`` is the union of ``CispoLoss``, ``DapoLoss``,
  ``SymmetricClipLoss`` (grpo, ppo), ``GspoLoss`` and ``ReinforceLoss`` (``LOSS_VARIANTS`` maps each type to its
  class), each holding only its own constants and the shared ``aggregation`` and ``kl_coef``.
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
    LOSS_VARIANTS,
    AdvantageConfig,
    BatchConfig,
    CispoLoss,
    CurriculumConfig,
    DapoLoss,
    FilterConfig,
    GspoLoss,
    InterruptionConfig,
    LengthConfig,
    LossConfig,
    OptimizerConfig,
    OverlongConfig,
    PipelineConfig,
    PrecisionConfig,
    Recipe,
    ReinforceLoss,
    RewardConfig,
    SamplingConfig,
    ScheduleConfig,
    SymmetricClipLoss,
)
from rl_core.recipe.paths import apply_overrides, dotted, get_value, recipe_overrides
from rl_core.recipe.presets import PRESET_OVERRIDES, PRESETS, get_preset

__all__ = [
    "DEFAULT_MAX_RUNS",
    "INTERRUPTION_PHRASE",
    "LEAVE_ONE_OUT",
    "LOSS_VARIANTS",
    "PRESETS",
    "PRESET_OVERRIDES",
    "AdvantageConfig",
    "BatchConfig",
    "CispoLoss",
    "CurriculumConfig",
    "DapoLoss",
    "FilterConfig",
    "GridCell",
    "GridError",
    "GridTooLargeError",
    "GspoLoss",
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
    "ReinforceLoss",
    "RewardConfig",
    "SamplingConfig",
    "ScheduleConfig",
    "SymmetricClipLoss",
    "apply_overrides",
    "canonical_json",
    "cell_id",
    "dotted",
    "expand_grid",
    "get_preset",
    "get_value",
    "leave_one_out",
    "leave_one_out_overrides",
    "load_recipe",
    "recipe_digest",
    "recipe_overrides",
    "recipe_to_dict",
    "recipe_to_yaml",
]
