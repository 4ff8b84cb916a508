"""What the new-experiment form offers: presets, recipe keys for the grid axes, and an example document.

Everything comes from ``rl_core.recipe`` (the same library that validates the document on the server).
"""

from __future__ import annotations

import json
from typing import Any

from rl_core.recipe import recipe_to_dict
from rl_core.recipe.model import Recipe
from rl_core.recipe.presets import PRESETS

EXAMPLE_YAML = """\
name: batch-sweep
description: batch size at fixed recipe
preset: scalerl
grid:
  batch.prompts: [32, 48, 64]
seeds: [0]
task: synthetic-addition
model: tiny
budget: 0.05
compute_unit: gpu_hours
"""


def recipe_keys(data: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Dotted leaf keys of a recipe with their default value (shown as hints next to the axis fields)."""
    out: list[tuple[str, str]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.extend(recipe_keys(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", json.dumps(value)))
    return out


def form_context() -> dict[str, Any]:
    return {
        "presets": list(PRESETS),
        "recipe_keys": recipe_keys(recipe_to_dict(Recipe())),
        "example_yaml": EXAMPLE_YAML,
    }
