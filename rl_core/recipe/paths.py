"""Dotted keys into the recipe schema: resolve them, read them, and apply overrides with clear errors.

A section may be *tagged* (``loss``): a union of variant models told apart by one key (``loss.type``), each
holding only its own keys. A dotted key under it is valid when some variant has it; which variant applies is
decided by the tag when the recipe is validated, and the error then names the keys of that variant.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

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


@dataclass(frozen=True)
class Tagged:
    """A tagged section: ``variants`` maps each value of the ``tag`` key to the model of that variant."""

    tag: str
    variants: Mapping[str, type[BaseModel]]

    def keys(self) -> tuple[str, ...]:
        """Every key of some variant, the tag first, in declaration order."""
        out: dict[str, None] = {}
        for cls in self.variants.values():
            out.update(dict.fromkeys(cls.model_fields))
        return tuple(out)

    def owners(self, key: str) -> tuple[str, ...]:
        """The tag values whose variant has ``key``."""
        return tuple(t for t, cls in self.variants.items() if key in cls.model_fields)

    def annotation(self, key: str) -> Any:
        """The annotation of ``key``: the tag's covers every variant; any other key's is its first owner's."""
        if key == self.tag:
            return Literal[tuple(self.variants)]
        owners = self.owners(key)
        return self.variants[owners[0]].model_fields[key].annotation if owners else None

    def retag(self, data: dict[str, Any], new: object) -> dict[str, Any]:
        """``data`` (a dump of one variant) as the start of variant ``new``: the keys ``new`` does not have are
        dropped (the others keep their values). Unchanged when ``new`` is its own tag or not a tag at all."""
        if not isinstance(new, str) or new not in self.variants or data.get(self.tag) == new:
            return data
        keep = self.variants[new].model_fields
        return {k: v for k, v in data.items() if k in keep}


#: A node of the schema: a section's model, or a tagged section.
Node = type[BaseModel] | Tagged


def _node(field: FieldInfo) -> Node | None:
    """The section (model or tagged union) a field holds, or None when it holds a value."""
    core = _unwrap(field.annotation)
    if isinstance(core, type) and issubclass(core, BaseModel):
        return core
    tag = field.discriminator
    if isinstance(tag, str) and typing.get_origin(core) in (typing.Union, UnionType):
        variants: dict[str, type[BaseModel]] = {}
        for cls in typing.get_args(core):
            for value in typing.get_args(_unwrap(cls.model_fields[tag].annotation)):
                variants[str(value)] = cls
        return Tagged(tag, variants)
    return None


def allowed_values(annotation: Any) -> tuple[str, ...]:
    """The finite set of allowed values of a field, rendered as strings (empty when not finite)."""
    core = _unwrap(annotation)
    if typing.get_origin(core) is Literal:
        return tuple(str(v) for v in typing.get_args(core))
    if core is bool:
        return ("true", "false")
    return ()


def keys_of(section: Node) -> tuple[str, ...]:
    """The keys allowed in a section, in declaration order (every variant's, for a tagged section)."""
    return section.keys() if isinstance(section, Tagged) else tuple(section.model_fields)


def _unknown(key: str, part: str, allowed: tuple[str, ...], hint: str = "") -> Problem:
    close = difflib.get_close_matches(part, allowed, n=1)
    suggestion = f"; did you mean {close[0]!r}?" if close else ""
    return Problem(key, f"unknown key {part!r}{hint}{suggestion}", allowed)


def resolve_key(key: str) -> Any:
    """Check that ``key`` names a field of the recipe and return its annotation; raise RecipeError if not.

    Under a tagged section a key is valid when some variant has it (``loss.eps_high``); whether the recipe's
    variant has it is checked when the recipe is validated.
    """
    parts = key.split(".") if key else []
    if not parts or any(not p for p in parts):
        raise RecipeError([Problem(key, "empty key or empty segment", keys_of(Recipe))])
    node: Node = Recipe
    for depth, part in enumerate(parts):
        prefix = ".".join(parts[: depth + 1])
        if isinstance(node, Tagged):
            owners = node.owners(part)
            if not owners:
                raise RecipeError([_unknown(prefix, part, node.keys())])
            if depth == len(parts) - 1:
                return node.annotation(part)
            field = node.variants[owners[0]].model_fields[part]
        else:
            found = node.model_fields.get(part)
            if found is None:
                raise RecipeError([_unknown(prefix, part, keys_of(node))])
            if depth == len(parts) - 1:
                return found.annotation
            field = found
        sub = _node(field)
        if sub is None:
            raise RecipeError([Problem(key, f"{prefix!r} is a value, not a section; it has no sub-keys")])
        node = sub
    raise AssertionError("unreachable")


def get_value(recipe: Recipe, key: str) -> Any:
    """The JSON-mode value at dotted ``key`` (sections come back as dicts; None for a key of a tagged section's
    other variants, e.g. ``loss.eps_high`` of a CISPO recipe)."""
    resolve_key(key)
    node: Any = recipe.model_dump(mode="json")
    for part in key.split("."):
        if part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True)
class _Place:
    """Where a validation error's location points: the dotted key (tag values pydantic puts in the location are
    left out), the model holding its last part and, under a tagged section, that section's key, tag and variant."""

    parts: tuple[str, ...]
    parent: type[BaseModel] | None
    tagged: tuple[str, Tagged, str] | None = None


def _place(loc: tuple[str, ...]) -> _Place:
    node: Node | None = Recipe
    parts: list[str] = []
    parent: type[BaseModel] | None = None
    tagged: tuple[str, Tagged, str] | None = None
    entered: tuple[str, Tagged, str] | None = None
    for part in loc:
        if isinstance(node, Tagged) and part in node.variants:
            entered = (".".join(parts), node, part)
            node = node.variants[part]
            continue
        parent = node if isinstance(node, type) else None
        tagged, entered = entered, None
        parts.append(part)
        field = parent.model_fields.get(part) if parent is not None else None
        node = _node(field) if field is not None else None
    return _Place(tuple(parts), parent, tagged)


def _extra_key(key: str, part: str, place: _Place) -> Problem:
    if place.tagged is not None and place.parent is not None:
        section, tagged, tag = place.tagged
        allowed = tuple(place.parent.model_fields)
        owners = tagged.owners(part)
        if owners:
            return Problem(
                key,
                f"{section}.{tagged.tag} {tag!r} has no key {part!r}; it is a key of {section}.{tagged.tag} "
                f"{', '.join(owners)}",
                allowed,
            )
        return _unknown(key, part, allowed, f" for {section}.{tagged.tag} {tag!r}")
    if place.parent is not None:
        return _unknown(key, part, keys_of(place.parent))
    return Problem(key, "unknown key")


def problems_from_validation(error: ValidationError, prefix: tuple[str, ...] = ()) -> list[Problem]:
    """Translate pydantic errors into problems naming the dotted key and, where finite, what is allowed."""
    problems: list[Problem] = []
    for err in error.errors(include_url=False):
        place = _place(prefix + tuple(str(p) for p in err["loc"]))
        key = ".".join(place.parts)
        kind = err["type"]
        if kind == "extra_forbidden":
            problems.append(_extra_key(key, place.parts[-1], place))
            continue
        field = place.parent.model_fields.get(place.parts[-1]) if place.parent is not None and place.parts else None
        node = _node(field) if field is not None else None
        if kind == "union_tag_invalid" and isinstance(node, Tagged):
            given = err["input"].get(node.tag) if isinstance(err["input"], Mapping) else err["input"]
            problems.append(Problem(f"{key}.{node.tag}", f"{given!r} is not allowed", tuple(node.variants)))
            continue
        if kind == "model_attributes_type" and node is not None:
            problems.append(Problem(key, f"a section must be a mapping (got {err['input']!r})", keys_of(node)))
            continue
        allowed = allowed_values(field.annotation) if field is not None else ()
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


def _child(node: Node | None, key: str, tag: object) -> Node | None:
    """The schema node at ``key`` under ``node`` (``tag``: the variant a tagged ``node`` holds)."""
    if isinstance(node, Tagged):
        node = node.variants.get(tag) if isinstance(tag, str) else None
    field = node.model_fields.get(key) if node is not None else None
    return _node(field) if field is not None else None


def _merge(base: dict[str, Any], update: Mapping[str, Any], node: Node | None = None) -> dict[str, Any]:
    """``update`` deep-merged over ``base``. Where ``update`` changes a tagged section's tag (``{"loss": {"type":
    "dapo"}}`` over a CISPO recipe), the section starts from the keys the new variant shares with the old one."""
    out = dict(base)
    tag = base.get(node.tag) if isinstance(node, Tagged) else None
    for k, v in update.items():
        child = _child(node, k, tag)
        old = out.get(k)
        if isinstance(v, Mapping) and isinstance(old, dict):
            if isinstance(child, Tagged):
                old = child.retag(old, v.get(child.tag, old.get(child.tag)))
            out[k] = _merge(old, v, child)
        else:
            out[k] = v
    return out


def merge_into(recipe: Recipe, nested: Mapping[str, Any]) -> Recipe:
    """Deep-merge a nested mapping (``{"loss": {"type": "dapo"}}``) into ``recipe`` and re-validate."""
    return validate_recipe(_merge(recipe.model_dump(), nested, Recipe))


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

    A value at a section key (``{"length.interruption": {...}}``) is merged into that section. Changing a tagged
    section's tag keeps the keys the new variant shares with the old one (``aggregation``, ``kl_coef``) and
    gives the new variant's own keys their defaults unless they are overridden too.
    """
    return merge_into(recipe, nest(overrides))


def dotted(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys to its leaves: ``{"loss": {"type": "cispo"}}`` -> ``{"loss.type": "cispo"}``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(dotted(value, f"{prefix}{key}.") if isinstance(value, Mapping) else {prefix + key: value})
    return out


def _retags(base: Mapping[str, Any], recipe: Mapping[str, Any], node: Node, prefix: str = "") -> dict[str, Any]:
    """The tag keys of the tagged sections whose tag differs between the two dumps, with ``recipe``'s tags."""
    out: dict[str, Any] = {}
    for key, value in recipe.items():
        child = _child(node, key, base.get(node.tag) if isinstance(node, Tagged) else None)
        old = base.get(key)
        if not isinstance(value, Mapping) or not isinstance(old, Mapping) or child is None:
            continue
        if isinstance(child, Tagged) and old.get(child.tag) != value.get(child.tag):
            out[f"{prefix}{key}.{child.tag}"] = value.get(child.tag)
        else:
            out.update(_retags(old, value, child, f"{prefix}{key}."))
    return out


def recipe_overrides(base: Recipe, recipe: Recipe) -> dict[str, Any]:
    """The fewest dotted overrides (JSON values) that turn ``base`` into ``recipe``:
    ``apply_overrides(base, recipe_overrides(base, recipe)) == recipe``.

    A changed tag is one override: ``{"loss.type": "dapo"}`` from a CISPO recipe to DAPO with its default
    constants, not DAPO's ``eps_low``/``eps_high`` as well (a plain comparison of the two dumps lists those, since
    the CISPO dump has no such keys).
    """
    out = _retags(base.model_dump(mode="json"), recipe.model_dump(mode="json"), Recipe)
    start = dotted(apply_overrides(base, out).model_dump(mode="json")) if out else dotted(base.model_dump(mode="json"))
    for key, value in dotted(recipe.model_dump(mode="json")).items():
        if key not in start or start[key] != value or type(start[key]) is not type(value):
            out[key] = value
    return out
