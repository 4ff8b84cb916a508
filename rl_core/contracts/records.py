"""Dataclass records as JSON values and as metrics, read off their fields: a record's serialised form names exactly
its fields, so adding a field cannot leave a hand-written literal behind."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import fields, is_dataclass
from typing import Any

__all__ = ["as_json", "as_metrics"]


def as_json(record: Any, *, skip: Collection[str] = ()) -> dict[str, Any]:
    """The fields of the dataclass instance ``record`` but ``skip``, in declaration order, as JSON values: nested
    records become dicts, tuples and lists become lists, mappings become (copied) dicts."""
    return {f.name: _json_value(getattr(record, f.name)) for f in fields(record) if f.name not in skip}


def as_metrics(record: Any, prefix: str, names: Mapping[str, str] | None = None) -> dict[str, float]:
    """The fields of the dataclass instance ``record`` as metrics ``<prefix><name>``, each a float; ``name`` is the
    field's name unless ``names`` maps it to another."""
    names = names or {}
    return {f"{prefix}{names.get(f.name, f.name)}": float(getattr(record, f.name)) for f in fields(record)}


def _json_value(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return as_json(value)
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    return value
