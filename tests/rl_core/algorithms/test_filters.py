"""Zero-variance filtering (drop) and DAPO dynamic sampling (refill)."""

from __future__ import annotations

import pytest
import torch

from rl_core.algorithms.filters import DynamicSampler, drop_zero_variance, is_zero_variance, nonzero_variance_mask


def test_is_zero_variance() -> None:
    assert is_zero_variance([1, 1, 1]) and is_zero_variance([-1.0, -1.0]) and is_zero_variance([])
    assert not is_zero_variance([1, -1, 1])


def test_drop_keeps_order_and_does_not_refill() -> None:
    res = drop_zero_variance(["a", "b", "c", "d"], [[1, 1], [1, -1], [-1, -1], [0, 1]])
    assert res.kept == ["b", "d"] and res.dropped == ["a", "c"]
    assert res.drop_fraction == 0.5
    with pytest.raises(ValueError, match="3 groups but 2"):
        drop_zero_variance(["a", "b", "c"], [[1], [2]])


def test_tensor_mask() -> None:
    rewards = torch.tensor([1.0, 1.0, 1.0, -1.0, 0.0, 0.0])
    groups = torch.tensor([4, 4, 2, 2, 0, 0])
    assert nonzero_variance_mask(rewards, groups).tolist() == [False, False, True, True, False, False]


def test_dynamic_sampling_refills_until_target() -> None:
    s: DynamicSampler[str] = DynamicSampler(target_groups=3, max_rounds=4)
    assert s.needs_more
    s.add(["a", "b"], [[1, 1], [1, -1]])
    assert s.n_ready == 1 and s.needs_more
    s.add(["c", "d", "e"], [[1, -1], [-1, -1], [-1, 1]])
    s.add(["f"], [[0, 1]])  # a third round even though full: surplus is counted, not used
    assert not s.needs_more and s.n_ready == 4
    assert s.take() == ["b", "c", "e"]
    assert (s.n_dropped, s.n_surplus, s.rounds, s.n_ready) == (2, 1, 0, 0)


def test_dynamic_sampling_stops_after_max_rounds() -> None:
    s: DynamicSampler[int] = DynamicSampler(target_groups=5, max_rounds=2)
    s.add([1, 2], [[1, 1], [0, 1]])
    s.add([3], [[1, 1]])
    assert not s.needs_more
    assert s.take() == [2]
    with pytest.raises(ValueError):
        DynamicSampler(target_groups=0, max_rounds=1)
