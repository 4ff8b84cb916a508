"""Grid expansion: a base recipe × dotted-key axes × seeds -> concrete, de-duplicated grid cells.

Invariants:
- The cap is checked on the requested size (product of axis lengths × number of distinct seeds) before any
  recipe is built, so an oversized grid is refused at once.
- A cell's ``id`` is a pure function of (full recipe values, seed): equal cells collapse, and the id is
  the same in every process. The first cell in expansion order keeps its name.
- ``apply_overrides(base, cell.overrides) == cell.recipe`` and ``cell.overrides`` holds only keys whose value
  differs from the base.
- Expansion order: axes in the given order (last axis fastest), seeds innermost.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from rl_core.recipe.errors import GridError, GridTooLargeError, Problem, RecipeError
from rl_core.recipe.io import canonical_json, load_recipe
from rl_core.recipe.model import Recipe
from rl_core.recipe.paths import apply_overrides, get_value, resolve_key

#: Default cap on the number of runs one grid may request.
DEFAULT_MAX_RUNS = 256


class GridCell(BaseModel):
    """One concrete run of a grid.

    ``id``: 12 hex chars, stable hash of the canonical recipe and the seed. ``name``: what differs from the
    base, e.g. ``loss=dapo,batch.prompts=32,seed=1`` (a ``.type`` suffix is dropped). ``overrides``: the
    dotted keys (JSON values) that differ from the base.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    recipe: Recipe
    seed: int
    overrides: dict[str, Any]


def cell_id(recipe: Recipe, seed: int) -> str:
    """Stable short id of a (recipe, seed) pair."""
    payload = f"{canonical_json(recipe)}|seed={seed}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:12]


def _display_key(key: str) -> str:
    return key.removesuffix(".type") if key.endswith(".type") else key


def _display_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def cell_name(overrides: Mapping[str, Any], seed: int) -> str:
    """Short human-readable name: ``key=value`` for each override, then ``seed=N``."""
    parts = [f"{_display_key(k)}={_display_value(v)}" for k, v in overrides.items()]
    parts.append(f"seed={seed}")
    return ",".join(parts)


def _check_seeds(seeds: Sequence[int]) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise GridError([Problem("seeds", f"seeds must be a list of integers, got {type(seeds).__name__}")])
    if not seeds:
        raise GridError([Problem("seeds", "at least one seed is required")])
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int)]
    if bad:
        raise GridError([Problem("seeds", f"seeds must be integers, got {bad!r}")])
    return list(dict.fromkeys(seeds))


def _check_axes(axes: Mapping[str, Sequence[Any]]) -> list[tuple[str, list[Any]]]:
    if not isinstance(axes, Mapping):
        raise GridError([Problem("axes", f"axes must be a mapping of dotted key -> list, got {type(axes).__name__}")])
    problems: list[Problem] = []
    checked: list[tuple[str, list[Any]]] = []
    for key, values in axes.items():
        try:
            resolve_key(str(key))
        except RecipeError as exc:
            problems.extend(exc.problems)
            continue
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
            problems.append(Problem(key, f"an axis must be a list of values, got {type(values).__name__}"))
            continue
        if not values:
            problems.append(Problem(key, "an axis must have at least one value"))
            continue
        checked.append((str(key), list(values)))
    if problems:
        raise GridError(problems)
    return checked


def expand_grid(
    base: Recipe | Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]] | None = None,
    seeds: Sequence[int] = (0,),
    max_runs: int = DEFAULT_MAX_RUNS,
) -> list[GridCell]:
    """Expand ``base`` × ``axes`` × ``seeds`` into concrete, validated, de-duplicated cells.

    ``axes`` maps dotted recipe keys to value lists, e.g. ``{"loss.type": ["cispo", "dapo"]}``. Raises
    GridError (a RecipeError) naming the bad key and what is allowed there, and GridTooLargeError when more
    than ``max_runs`` runs are requested.
    """
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise GridError([Problem("max_runs", f"max_runs must be a positive integer, got {max_runs!r}")])
    base_recipe = load_recipe(base)
    seed_list = _check_seeds(seeds)
    axis_list = _check_axes(axes or {})
    requested = math.prod(len(values) for _, values in axis_list) * len(seed_list)
    if requested > max_runs:
        raise GridTooLargeError(requested, max_runs)

    keys = [key for key, _ in axis_list]
    base_values = {key: get_value(base_recipe, key) for key in keys}
    cells: dict[str, GridCell] = {}
    for combo in itertools.product(*(values for _, values in axis_list)):
        assignment = dict(zip(keys, combo, strict=True))
        try:
            recipe = apply_overrides(base_recipe, assignment)
        except RecipeError as exc:
            where = ",".join(f"{k}={v!r}" for k, v in assignment.items())
            raise GridError(exc.problems, context=f"invalid grid cell ({where})") from None
        diff = {k: get_value(recipe, k) for k in keys if get_value(recipe, k) != base_values[k]}
        for seed in seed_list:
            ident = cell_id(recipe, seed)
            if ident not in cells:
                cells[ident] = GridCell(id=ident, name=cell_name(diff, seed), recipe=recipe, seed=seed, overrides=diff)
    return list(cells.values())
