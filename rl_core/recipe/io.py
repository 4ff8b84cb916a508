"""Loading, dumping and fingerprinting recipes.

A recipe document is a mapping (or YAML text/file) of the Recipe's sections. It may name a starting
preset with a top-level ``preset`` key; the other keys are deep-merged over that preset:

    preset: qwen-dapo
    batch: {prompts: 32}

Invariant: ``canonical_json`` is a pure function of the recipe's values, so equal recipes have equal
digests in every process and on every machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rl_core.recipe.errors import Problem, RecipeError
from rl_core.recipe.model import Recipe
from rl_core.recipe.paths import merge_into, validate_recipe

PRESET_KEY = "preset"


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RecipeError([Problem("", f"{source} is not valid YAML: {exc}")]) from None


def load_recipe(source: Recipe | Mapping[str, Any] | str | Path) -> Recipe:
    """Build a validated Recipe from a Recipe, a mapping, YAML text, or a path to a YAML file.

    A one-line string ending in .yaml/.yml/.json is a file path; any other string is YAML text. An empty document is
    the default (ScaleRL) recipe. Raises RecipeError naming every bad dotted key and what is allowed there.
    """
    if isinstance(source, Recipe):
        return source
    if isinstance(source, Path):
        data = _parse_yaml(source.read_text(encoding="utf-8"), str(source))
    elif isinstance(source, str):
        path = Path(source)
        if "\n" not in source and path.suffix in {".yaml", ".yml", ".json"}:
            if not path.is_file():
                raise RecipeError([Problem("", f"recipe file {source!r} does not exist")])
            data = _parse_yaml(path.read_text(encoding="utf-8"), source)
        else:
            data = _parse_yaml(source, "recipe text")
    else:
        data = source
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise RecipeError([Problem("", f"a recipe must be a mapping, got {type(data).__name__}")])
    data = dict(data)
    preset = data.pop(PRESET_KEY, None)
    if preset is None:
        return validate_recipe(data)
    from rl_core.recipe.presets import get_preset

    return merge_into(get_preset(str(preset)), data)


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """JSON-compatible nested dict of every value (tuples become lists)."""
    return recipe.model_dump(mode="json")


def recipe_to_yaml(recipe: Recipe) -> str:
    """YAML text that ``load_recipe`` turns back into an equal Recipe."""
    return yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False)


def canonical_json(recipe: Recipe) -> str:
    """Sorted-key, whitespace-free JSON of the full recipe: the basis of recipe identity."""
    return json.dumps(recipe_to_dict(recipe), sort_keys=True, separators=(",", ":"), allow_nan=False)


def recipe_digest(recipe: Recipe, *, length: int = 12) -> str:
    """Short stable hex fingerprint of the recipe's values (sha256 of ``canonical_json``)."""
    return hashlib.sha256(canonical_json(recipe).encode("utf-8")).hexdigest()[:length]
