"""Records serialised off their fields: JSON values (nested records, tuples, mappings) and prefixed metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from rl_core.contracts.records import as_json, as_metrics


@dataclass(frozen=True)
class _Leaf:
    x: float
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tree:
    name: str
    leaves: tuple[_Leaf, ...]
    extra: dict[str, list[int]] = field(default_factory=dict)


def test_as_json_recurses_into_records_tuples_and_mappings() -> None:
    tree = _Tree("t", (_Leaf(1.0, ("a",)), _Leaf(2.0)), {"k": [1, 2]})
    doc = as_json(tree)
    assert doc == {"name": "t", "leaves": [{"x": 1.0, "tags": ["a"]}, {"x": 2.0, "tags": []}], "extra": {"k": [1, 2]}}
    assert list(doc) == ["name", "leaves", "extra"]  # declaration order
    assert doc["extra"] is not tree.extra and doc["extra"]["k"] is not tree.extra["k"]  # copies, not the record's own
    assert as_json(tree, skip=("leaves", "extra")) == {"name": "t"}


@dataclass(frozen=True)
class _Counts:
    rate: float
    tokens: int


def test_as_metrics_prefixes_every_field_as_a_float() -> None:
    metrics = as_metrics(_Counts(0.5, 7), "eval/", {"rate": "pass_rate"})
    assert metrics == {"eval/pass_rate": 0.5, "eval/tokens": 7.0}
    assert isinstance(metrics["eval/tokens"], float)
