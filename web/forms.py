"""What the new-experiment form offers: presets, recipe keys for the grid axes, and an example document.

Everything comes from ``rl_core.recipe`` (the same library that validates the document on the server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rl_core.recipe import recipe_to_dict
from rl_core.recipe.model import Recipe
from rl_core.recipe.presets import PRESETS
from server.demo_grid import REQUIRED_KEYS, demo_document

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


#: The demo's engine run config, in a source checkout (``configs/`` is not part of the installed package).
DEMO_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
DEMO_BUDGET = 0.05


def demo_yaml(path: Path = DEMO_CONFIG) -> str | None:
    """The grid ``scalerl demo`` submits (the demo config's recipe, leave-one-out, its task and model, 0.05 device-hours
    a run) as a YAML document for the form, or None when the config is not there."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict) or not all(isinstance(config.get(k), dict) for k in REQUIRED_KEYS):
        return None
    description = "the demo's recipe (configs/demo.yaml): ScaleRL leave-one-out at CPU sizes"
    doc = demo_document(config, DEMO_BUDGET, "demo-recipe", description)
    return str(yaml.safe_dump(doc, sort_keys=False))


def form_context() -> dict[str, Any]:
    return {
        "presets": list(PRESETS),
        "recipe_keys": recipe_keys(recipe_to_dict(Recipe())),
        "example_yaml": EXAMPLE_YAML,
        "demo_yaml": demo_yaml(),
    }
