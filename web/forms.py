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
from server.lifecycle.demo_grid import DEMO_GRIDS, REQUIRED_KEYS, demo_document

EXAMPLE_YAML = """\
name: lr-sweep
description: learning rate at the demo's CPU sizes (a tiny model on synthetic addition)
preset: scalerl
recipe:
  batch: {prompts: 16, generations: 8}
  optimizer: {lr: 1.0e-4, eps: 1.0e-8}
  length: {max_prompt_tokens: 32, max_response_tokens: 64,
           interruption: {budget_min: 40, budget_max: 48, answer_budget: 12}, overlong: {cache_tokens: 12}}
grid:
  optimizer.lr: [1.0e-4, 2.0e-4]
seeds: [0]
task: "{kind: synthetic-addition, digits_min: 1, digits_max: 3, train_size: 2000, validation_size: 200}"
model: "{preset: tiny}"
budget: 0.1
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


def demo_yamls(path: Path = DEMO_CONFIG) -> dict[str, str]:
    """The grids ``scalerl demo`` can submit (each preset of ``server.lifecycle.demo_grid.DEMO_GRIDS`` on the demo
    config's recipe, task and model), by preset key, as YAML documents for the form; empty when the config is not
    there."""
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    if not isinstance(config, dict) or not all(isinstance(config.get(k), dict) for k in REQUIRED_KEYS):
        return {}
    return {
        key: str(yaml.safe_dump(demo_document(config, grid.budget, grid.name, grid.description, grid), sort_keys=False))
        for key, grid in DEMO_GRIDS.items()
    }


#: The form's defaults: a grid the demo's base model learns and can forecast (the demo's CPU sizes, a learning-rate
#: axis, a budget that buys about 13 evaluations a run at the demo's measured speed). The scalerl preset's own
#: sizes (48 x 16 samples of up to 16k tokens) bought about 2 evaluations a run: never a forecast.
FORM_DEFAULTS: dict[str, Any] = {
    "task": "{kind: synthetic-addition, digits_min: 1, digits_max: 3, train_size: 2000, validation_size: 200}",
    "model": "{preset: tiny}",
    "budget": 0.1,
    "axis": ["optimizer.lr", "1e-4, 2e-4"],
    "recipe": {},
}


def form_defaults(path: Path = DEMO_CONFIG) -> dict[str, Any]:
    """:data:`FORM_DEFAULTS` with the demo config's recipe sizes, task and model when the config is there."""
    out = dict(FORM_DEFAULTS)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        config = None
    if isinstance(config, dict) and all(isinstance(config.get(k), dict) for k in REQUIRED_KEYS):
        doc = demo_document(config, float(out["budget"]), "form-defaults", "")
        out.update(task=doc["task"], model=doc["model"], recipe=doc["recipe"])
    return out


def form_context() -> dict[str, Any]:
    return {
        "presets": list(PRESETS),
        "recipe_keys": recipe_keys(recipe_to_dict(Recipe())),
        "example_yaml": EXAMPLE_YAML,
        "demo_yamls": demo_yamls(),
        "defaults": form_defaults(),
    }
