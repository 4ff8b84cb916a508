"""Length control: the forced-interruption state machine, token cap, budgets, stats, overlong penalty."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from rl_core.algorithms.length import (
    FinishReason,
    ForcedInterruption,
    Phase,
    TokenBudget,
    length_stats,
    make_length_controller,
    overlong_penalty,
    sample_thinking_budget,
    truncation_rate,
)
from rl_core.recipe import Recipe, apply_overrides

EOS = 0
THINK_END = [101, 102]  # a multi-token "</think>"
PHRASE = [90, 91, 101, 102]  # "... final answer now. </think>"


def _ctl(budget: int = 5, answer: int = 3, mask: bool = True) -> ForcedInterruption:
    return ForcedInterruption(
        thinking_budget=budget,
        answer_budget=answer,
        phrase_ids=PHRASE,
        think_end_ids=THINK_END,
        eos_ids={EOS},
        mask_injected=mask,
    )


def test_interrupts_at_budget_then_truncates_on_answer_budget() -> None:
    ctl = _ctl()
    steps = [ctl.observe(t) for t in [1, 2, 3, 4]]
    assert all(s.inject == () and not s.done for s in steps) and ctl.phase is Phase.THINKING
    step = ctl.observe(5)
    assert step.inject == tuple(PHRASE) and not step.done
    assert ctl.interrupted and ctl.phase is Phase.ANSWERING
    assert ctl.injected_span == (5, 9)
    assert [ctl.observe(t).done for t in [6, 7, 8]] == [False, False, True]
    assert ctl.truncated and ctl.finish_reason is FinishReason.ANSWER_BUDGET
    assert ctl.response_ids == [1, 2, 3, 4, 5, *PHRASE, 6, 7, 8]
    assert ctl.loss_mask() == [True] * 5 + [False] * 4 + [True] * 3
    assert len(ctl.response_ids) == ctl.max_total_tokens
    with pytest.raises(RuntimeError):
        ctl.observe(9)


def test_answer_ending_with_eos_is_not_truncated() -> None:
    ctl = _ctl()
    for t in [1, 2, 3, 4, 5]:
        ctl.observe(t)
    ctl.observe(6)
    assert ctl.observe(EOS).done
    assert not ctl.truncated and ctl.interrupted and ctl.finish_reason is FinishReason.EOS


def test_natural_end_of_thinking_injects_nothing() -> None:
    ctl = _ctl(budget=5)
    steps = [ctl.observe(t) for t in [1, 2, 3, 101, 102]]  # </think> completes exactly at the budget
    assert all(s.inject == () for s in steps)
    assert ctl.phase is Phase.ANSWERING and not ctl.interrupted and ctl.injected_span is None
    assert ctl.observe(EOS).done and ctl.loss_mask() == [True] * 6


def test_eos_while_thinking_and_unmasked_injection() -> None:
    ctl = _ctl()
    assert ctl.observe(EOS).done and ctl.finish_reason is FinishReason.EOS and not ctl.truncated
    ctl = _ctl(budget=1, mask=False)
    assert ctl.observe(7).inject == tuple(PHRASE)
    assert ctl.loss_mask() == [True] * 5


def test_token_budget() -> None:
    ctl = TokenBudget(max_tokens=3, eos_ids={EOS})
    assert [ctl.observe(t).done for t in [4, 5, 6]] == [False, False, True]
    assert ctl.truncated and ctl.finish_reason is FinishReason.LENGTH and not ctl.interrupted
    ctl = TokenBudget(max_tokens=3, eos_ids={EOS})
    ctl.observe(4)
    assert ctl.observe(EOS).done and not ctl.truncated and ctl.loss_mask() == [True, True]


def test_thinking_budget_is_uniform_over_the_inclusive_range() -> None:
    rng = random.Random(0)
    counts = Counter(sample_thinking_budget(rng, 3, 6) for _ in range(4000))
    assert set(counts) == {3, 4, 5, 6}
    assert all(abs(c / 4000 - 0.25) < 0.03 for c in counts.values())
    with pytest.raises(ValueError):
        sample_thinking_budget(rng, 5, 4)


def test_controller_from_recipe() -> None:
    r = apply_overrides(
        Recipe(),
        {
            "length.interruption": {"budget_min": 4, "budget_max": 6, "answer_budget": 2},
            "length.max_response_tokens": 8,
        },
    )
    budgets = set()
    for seed in range(40):
        ctl = make_length_controller(
            r.length, rng=random.Random(seed), phrase_ids=PHRASE, think_end_ids=THINK_END, eos_ids={EOS}
        )
        assert isinstance(ctl, ForcedInterruption) and ctl.answer_budget == 2
        budgets.add(ctl.thinking_budget)
    assert budgets == {4, 5, 6}
    dapo = apply_overrides(r, {"length.mode": "overlong_penalty", "length.overlong.cache_tokens": 2})
    ctl2 = make_length_controller(
        dapo.length, rng=random.Random(0), phrase_ids=PHRASE, think_end_ids=THINK_END, eos_ids={EOS}
    )
    assert isinstance(ctl2, TokenBudget) and ctl2.max_tokens == 8


def test_sampling_loop_truncation_stats() -> None:
    """A toy token-level engine loop driving the state machine, as the engine will."""
    rng = random.Random(1)
    controllers = []
    for i in range(50):
        ctl = _ctl(budget=rng.randint(4, 6), answer=3)
        sampled = 0
        while True:
            stop_thinking = i % 5 == 0 and sampled == 2
            stop_answering = i % 5 == 1 and ctl.phase is Phase.ANSWERING
            step = ctl.observe(EOS if stop_thinking or stop_answering else 10 + sampled)
            sampled += 1
            if step.done:
                break
        controllers.append(ctl)
    stats = length_stats(controllers)
    # i%5==0 stop while thinking (EOS), i%5==1 stop inside the answer budget (EOS); the rest are truncated.
    assert stats.n == 50 and stats.truncation_rate == pytest.approx(0.6)
    assert stats.interruption_rate == pytest.approx(0.8)
    assert stats.max_length <= 6 + len(PHRASE) + 3
    assert truncation_rate([]) == 0.0 and truncation_rate([True, False, False, False]) == 0.25


def test_overlong_penalty_closed_form() -> None:
    lengths = torch.tensor([10, 16, 17, 18, 20, 21])
    assert overlong_penalty(lengths, max_tokens=20, cache_tokens=4).tolist() == [0.0, 0.0, -0.25, -0.5, -1.0, -1.0]
    assert overlong_penalty(lengths, 20, 4, penalty=0.5).tolist() == [0.0, 0.0, -0.125, -0.25, -0.5, -0.5]
    with pytest.raises(ValueError):
        overlong_penalty(lengths, 4, 4)
