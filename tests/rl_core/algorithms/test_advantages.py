"""Advantages: group-mean baseline and the three normalisations, closed form."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.algorithms.advantages import compute_advantages, group_mean, recipe_rewards, rewards_from_correctness
from rl_core.recipe import Recipe, get_preset

CORRECT = torch.tensor([True, False, False, False, True, True, True, True])
GROUPS = torch.tensor([5, 5, 5, 5, 9, 9, 9, 9])


def test_reward_schemes() -> None:
    assert rewards_from_correctness(CORRECT[:4], "pm1").tolist() == [1.0, -1.0, -1.0, -1.0]
    assert rewards_from_correctness(CORRECT[:4], "binary").tolist() == [1.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="allowed: pm1, binary"):
        rewards_from_correctness(CORRECT, "ternary")  # type: ignore[arg-type]


def test_group_mean_baseline_without_normalisation() -> None:
    adv = compute_advantages(rewards_from_correctness(CORRECT), GROUPS, "none")
    assert adv.tolist() == [1.5, -0.5, -0.5, -0.5, 0.0, 0.0, 0.0, 0.0]


def test_group_std_normalisation() -> None:
    adv = compute_advantages(rewards_from_correctness(CORRECT), GROUPS, "group", std_eps=0.0)
    s = math.sqrt(0.75)  # population std of [1, -1, -1, -1]
    assert adv[:4].tolist() == pytest.approx([1.5 / s, -0.5 / s, -0.5 / s, -0.5 / s])
    # A zero-variance group gets 0 / (0 + eps) = 0 (the recipe requires std_eps > 0).
    assert compute_advantages(rewards_from_correctness(CORRECT), GROUPS, "group")[4:].tolist() == [0.0] * 4


def test_batch_std_normalisation() -> None:
    adv = compute_advantages(rewards_from_correctness(CORRECT), GROUPS, "batch", std_eps=0.0)
    s = math.sqrt((1.5**2 + 3 * 0.5**2) / 8)  # std over all 8 centred rewards (mean 0)
    assert adv.tolist() == pytest.approx([1.5 / s, -0.5 / s, -0.5 / s, -0.5 / s, 0, 0, 0, 0])
    assert adv.square().mean().item() == pytest.approx(1.0)


@pytest.mark.parametrize("norm", ["batch", "group"])
def test_normalised_advantages_do_not_depend_on_reward_scheme(norm: str) -> None:
    pm1 = compute_advantages(rewards_from_correctness(CORRECT, "pm1"), GROUPS, norm)  # type: ignore[arg-type]
    binary = compute_advantages(rewards_from_correctness(CORRECT, "binary"), GROUPS, norm)  # type: ignore[arg-type]
    assert torch.allclose(pm1, binary, rtol=1e-5)
    raw = compute_advantages(rewards_from_correctness(CORRECT, "binary"), GROUPS, "none")
    assert raw[:4].tolist() == [0.75, -0.25, -0.25, -0.25]


def test_groups_need_not_be_contiguous() -> None:
    rewards = torch.tensor([1.0, 0.0, 3.0, 2.0])
    groups = torch.tensor([2, 8, 2, 8])
    assert group_mean(rewards, groups).tolist() == [2.0, 1.0, 2.0, 1.0]
    assert compute_advantages(rewards, groups, "none").tolist() == [-1.0, -1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="allowed: batch, group, none"):
        compute_advantages(rewards, groups, "global")  # type: ignore[arg-type]


def test_recipe_rewards_add_the_overlong_penalty_only_in_that_mode() -> None:
    correct = torch.tensor([True, True, False])
    lengths = torch.tensor([100, 12_288, 14_336])
    dapo = get_preset("qwen-dapo")  # max 14,336 tokens, cache 4,096 -> ramp from 10,240
    assert recipe_rewards(correct, lengths, dapo.reward, dapo.length).tolist() == pytest.approx([1.0, 0.5, -2.0])
    scalerl = Recipe()
    assert recipe_rewards(correct, lengths, scalerl.reward, scalerl.length).tolist() == [1.0, 1.0, -1.0]
