"""ORM rows -> response models: one reading, by attribute name, instead of a field-by-field copy per model."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypeVar, overload

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: None) -> None: ...
def as_utc(value: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes: they are UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=timezone.utc)


class _Row:
    """The attributes ``model`` reads from ``row``, with ``fields`` in front (see :func:`from_row`)."""

    __slots__ = ("_fields", "_model", "_row")

    def __init__(self, model: type[BaseModel], row: object, fields: dict[str, Any]) -> None:
        self._model = model
        self._row = row
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        if name in self._fields:
            return self._fields[name]
        value = getattr(self._row, name)
        if isinstance(value, datetime):
            return as_utc(value)
        field = self._model.model_fields.get(name)
        if value is None and field is not None and not field.is_required():
            return field.get_default(call_default_factory=True)
        return value


def from_row(model: type[M], row: object, **fields: Any) -> M:
    """``model.model_validate(row, from_attributes=True)``, where ``fields`` (what the row does not hold under the
    field's name: computed or renamed values) come before the row's attributes.

    Invariants: a naive datetime read from the row is UTC (SQLite returns naive datetimes); a NULL column whose field
    has a default reads as that default (a run's ``config`` stored NULL answers ``{}``). ``fields`` are taken as
    given."""
    return model.model_validate(_Row(model, row, fields), from_attributes=True)
