"""Dotted keys into the recipe schema: resolve them, read them, and apply overrides with clear errors."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from rl_core.recipe.errors import Problem, RecipeError
from rl_core.recipe.model import Recipe


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` down to the core type."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    args = typing.get_args(annotation)
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _unwrap(rest[0])
    return annotation


def _section_class(annotation: Any) -> type[BaseModel] | None:
    core = _unwrap(annotation)
    if isinstance(core, type) and issubclass(core, BaseModel):
        return core
    return None


def allowed_values(annotation: Any) -> tuple[str, ...]:
    """The finite set of allowed values of a field, rendered as strings (empty when not finite)."""
    core = _unwrap(annotation)
    if typing.get_origin(core) is Literal:
        return tuple(str(v) for v in typing.get_args(core))
    if core is bool:
        return ("true", "false")
    return ()


def keys_of(section: type[BaseModel]) -> tuple[str, ...]:
    """The keys allowed in a section, in declaration order."""
    return tuple(section.model_fields)


def section_at(path: tuple[str, ...]) -> type[BaseModel] | None:
    """The section model class at ``path`` (``()`` is the Recipe itself), or None if it is not a section."""
    cls: type[BaseModel] = Recipe
    for part in path:
        field = cls.model_fields.get(part)
        if field is None:
            return None
        sub = _section_class(field.annotation)
        if sub is None:
            return None
        cls = sub
    return cls


def _unknown(key: str, part: str, cls: type[BaseModel]) -> Problem:
    allowed = keys_of(cls)
    close = difflib.get_close_matches(part, allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return Problem(key, f"unknown key {part!r}{hint}", allowed)


def resolve_key(key: str) -> Any:
    """Check that ``key`` names a field of the recipe and return its annotation; raise RecipeError if not."""
    parts = key.split(".") if key else []
    if not parts or any(not p for p in parts):
        raise RecipeError([Problem(key, "empty key or empty segment", keys_of(Recipe))])
    cls: type[BaseModel] = Recipe
    for depth, part in enumerate(parts):
        field = cls.model_fields.get(part)
        prefix = ".".join(parts[: depth + 1])
        if field is None:
            raise RecipeError([_unknown(prefix, part, cls)])
        if depth == len(parts) - 1:
            return field.annotation
        sub = _section_class(field.annotation)
        if sub is None:
            raise RecipeError([Problem(key, f"{prefix!r} is a value, not a section; it has no sub-keys")])
        cls = sub
    raise AssertionError("unreachable")


def get_value(recipe: Recipe, key: str) -> Any:
    """The JSON-mode value at dotted ``key`` (sections come back as dicts)."""
    resolve_key(key)
    node: Any = recipe.model_dump(mode="json")
    for part in key.split("."):
        node = node[part]
    return node


def problems_from_validation(error: ValidationError, prefix: tuple[str, ...] = ()) -> list[Problem]:
    """Translate pydantic errors into problems naming the dotted key and, where finite, what is allowed."""
    problems: list[Problem] = []
    for err in error.errors(include_url=False):
        loc = prefix + tuple(str(p) for p in err["loc"])
        key = ".".join(loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = section_at(loc[:-1])
            if parent is not None:
                problems.append(_unknown(key, loc[-1], parent))
                continue
            problems.append(Problem(key, "unknown key"))
            continue
        allowed: tuple[str, ...] = ()
        parent = section_at(loc[:-1]) if loc else None
        if parent is not None and loc[-1] in parent.model_fields:
            allowed = allowed_values(parent.model_fields[loc[-1]].annotation)
        message = str(err["msg"]).removeprefix("Value error, ")
        if kind == "literal_error" and allowed:
            message = f"{err['input']!r} is not allowed"
        elif kind not in {"value_error", "assertion_error"} and "input" in err:
            message += f" (got {err['input']!r})"
        problems.append(Problem(key, message, allowed))
    return problems


def validate_recipe(data: Mapping[str, Any]) -> Recipe:
    """Build a Recipe from plain data; any problem raises RecipeError naming every bad key."""
    if not isinstance(data, Mapping):
        raise RecipeError([Problem("", f"a recipe must be a mapping, got {type(data).__name__}")])
    try:
        return Recipe.model_validate(dict(data))
    except ValidationError as exc:
        raise RecipeError(problems_from_validation(exc)) from None


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in update.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def merge_into(recipe: Recipe, nested: Mapping[str, Any]) -> Recipe:
    """Deep-merge a nested mapping (``{"loss": {"type": "dapo"}}``) into ``recipe`` and re-validate."""
    return validate_recipe(_merge(recipe.model_dump(), nested))


def nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``{"a.b": 1}`` into ``{"a": {"b": 1}}`` after checking every key against the schema."""
    problems: list[Problem] = []
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        try:
            resolve_key(key)
        except RecipeError as exc:
            problems.extend(exc.problems)
            continue
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if isinstance(value, Mapping) and isinstance(node.get(parts[-1]), dict):
            node[parts[-1]] = _merge(node[parts[-1]], value)
        else:
            node[parts[-1]] = value
    if problems:
        raise RecipeError(problems)
    return nested


def apply_overrides(recipe: Recipe, overrides: Mapping[str, Any]) -> Recipe:
    """A copy of ``recipe`` with dotted-key overrides applied (``{"loss.type": "dapo"}``), fully re-validated.

    A value at a section key (``{"length.interruption": {...}}``) is merged into that section.
    """
    return merge_into(recipe, nest(overrides))
