"""Parsing a metrics request body into valid points and rejected ones.

Fast path: the whole body is validated straight from JSON bytes (pydantic-core) when every point is valid.
Otherwise the body is parsed leniently (NaN/Infinity literals included) and each point is validated on its own,
so one bad point never costs the good ones. Invariant: both paths accept and reject exactly the same points.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import TypeAdapter, ValidationError

from server.ingest import validate_points
from server.safeinput import UnsafeInput, clip, loads_json
from server.schemas import MetricPoint, MetricsBatchIn, RejectedPoint

_FAST = TypeAdapter(MetricsBatchIn)
SHAPE = 'the body must be a JSON object {"points": [point, ...]} with at least one point'


class BatchError(ValueError):
    """The body as a whole is unusable (HTTP 422)."""


@dataclass
class ParsedBatch:
    points: list[tuple[int, MetricPoint]] = field(default_factory=list)
    rejected: list[RejectedPoint] = field(default_factory=list)


def parse_batch(body: bytes, max_points: int) -> ParsedBatch:
    try:
        points = _FAST.validate_json(body).points
    except ValidationError:
        pass
    else:
        _check_size(len(points), max_points)
        return ParsedBatch(list(enumerate(points)))
    try:
        data = loads_json(body)
    except UnsafeInput as exc:
        raise BatchError(str(exc)) from None
    except ValueError as exc:
        raise BatchError(f"the body is not valid JSON: {clip(str(exc), 300)}") from None
    if not isinstance(data, dict) or set(data) != {"points"} or not isinstance(data["points"], list):
        raise BatchError(SHAPE)
    if not data["points"]:
        raise BatchError(SHAPE)
    _check_size(len(data["points"]), max_points)
    good, bad = validate_points(data["points"])
    return ParsedBatch(good, bad)


def _check_size(n: int, max_points: int) -> None:
    if n > max_points:
        raise BatchError(f"batch has {n} points; at most {max_points} are allowed per request")
