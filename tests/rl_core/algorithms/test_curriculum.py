"""No-Positive-Resampling: retirement, history modes, permanence, checkpoint round trip."""

from __future__ import annotations

import json

import pytest

from rl_core.algorithms.curriculum import NoPositiveResampling
from rl_core.recipe import Recipe


def test_retires_at_or_above_threshold() -> None:
    npr = NoPositiveResampling(0.9)
    assert npr.update("exact", 9, 10)  # 0.9 is "at" the threshold
    assert npr.update("high", 15, 16)
    assert not npr.update("low", 14, 16)
    assert npr.active(["exact", "low", "high", "new"]) == ["low", "new"]
    assert npr.pass_rate("low") == 14 / 16 and npr.pass_rate("new") is None


def test_last_vs_cumulative_history() -> None:
    last = NoPositiveResampling(0.9, history="last")
    cum = NoPositiveResampling(0.9, history="cumulative")
    for c in (last, cum):
        c.update("p", 8, 16)
        c.update("p", 16, 16)
    assert last.is_retired("p") and last.pass_rate("p") == 1.0
    assert not cum.is_retired("p") and cum.pass_rate("p") == 0.75


def test_retirement_is_permanent() -> None:
    npr = NoPositiveResampling(0.9)
    npr.update("p", 16, 16)
    npr.update("p", 0, 16)
    assert npr.is_retired("p") and npr.pass_rate("p") == 0.0


def test_disabled_never_retires() -> None:
    npr = NoPositiveResampling.from_config(Recipe().curriculum.model_copy(update={"no_positive_resampling": False}))
    assert not npr.update("p", 16, 16)
    assert npr.active(["p"]) == ["p"]


def test_from_recipe_defaults() -> None:
    npr = NoPositiveResampling.from_config(Recipe().curriculum)
    assert (npr.threshold, npr.history, npr.enabled) == (0.9, "last", True)


def test_epoch_order_is_deterministic_and_excludes_retired() -> None:
    npr = NoPositiveResampling(0.9)
    ids = [f"q{i}" for i in range(20)]
    npr.update("q3", 10, 10)
    e1 = npr.epoch_order(ids, epoch=1, seed=7)
    assert e1 == npr.epoch_order(ids, epoch=1, seed=7)
    assert e1 != npr.epoch_order(ids, epoch=2, seed=7)
    assert sorted(e1) == sorted(set(ids) - {"q3"})


def test_state_round_trip_through_json() -> None:
    npr = NoPositiveResampling(0.8, history="cumulative")
    npr.update("a", 4, 4)
    npr.update("b", 1, 4)
    npr.update("b", 3, 4)
    state = json.loads(json.dumps(npr.state_dict()))
    restored = NoPositiveResampling()
    restored.load_state_dict(state)
    assert restored.state_dict() == npr.state_dict()
    assert restored.threshold == 0.8 and restored.history == "cumulative"
    assert restored.retired == {"a"} and restored.pass_rate("b") == 0.5
    # Behaviour continues identically after restore.
    assert restored.update("b", 4, 4) is npr.update("b", 4, 4) is False  # 8/12 < 0.8
    assert restored.update("b", 8, 8) is npr.update("b", 8, 8) is True  # 16/20 = 0.8
    with pytest.raises(ValueError, match="version"):
        restored.load_state_dict({**state, "version": 99})


def test_rejects_bad_counts() -> None:
    npr = NoPositiveResampling()
    with pytest.raises(ValueError):
        npr.update("p", 5, 4)
    with pytest.raises(ValueError):
        npr.update("p", 0, 0)
    with pytest.raises(ValueError):
        NoPositiveResampling(0.0)
