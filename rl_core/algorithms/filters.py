"""Zero-variance filtering (ScaleRL: drop, never refill) and DAPO dynamic sampling (drop, then refill).

A prompt group whose G rewards are all equal has Â = 0 for every response and contributes no gradient. These
helpers work on any group object (the engine's rollout type) with a parallel list of reward lists, and on
tensors for the trainer side. Invariant: kept groups keep their input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch
from torch import Tensor

T = TypeVar("T")


def is_zero_variance(rewards: Sequence[float]) -> bool:
    """True when every reward of the group is the same value (an empty or singleton group counts too)."""
    return len(set(rewards)) <= 1


def nonzero_variance_mask(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """Bool [N]: True for responses whose group has at least two distinct rewards (the ones to keep)."""
    _, inverse = torch.unique(group_ids, return_inverse=True)
    n = int(inverse.max().item()) + 1 if inverse.numel() else 0
    r = rewards.to(torch.float64)
    inf = torch.full((n,), float("inf"), dtype=torch.float64, device=r.device)
    lo = inf.scatter_reduce(0, inverse, r, reduce="amin")
    hi = (-inf).scatter_reduce(0, inverse, r, reduce="amax")
    return (hi > lo)[inverse]


@dataclass(frozen=True)
class FilterResult(Generic[T]):
    """Outcome of a filtering pass: ``kept`` and ``dropped`` groups in input order."""

    kept: list[T]
    dropped: list[T]

    @property
    def drop_fraction(self) -> float:
        """Share of groups dropped (0 for an empty input)."""
        total = len(self.kept) + len(self.dropped)
        return len(self.dropped) / total if total else 0.0


def _check(groups: Sequence[T], rewards: Sequence[Sequence[float]]) -> None:
    if len(groups) != len(rewards):
        raise ValueError(f"{len(groups)} groups but {len(rewards)} reward lists")


def drop_zero_variance(groups: Sequence[T], rewards: Sequence[Sequence[float]]) -> FilterResult[T]:
    """ScaleRL's filter: drop groups with zero reward variance; the batch shrinks and is not refilled."""
    _check(groups, rewards)
    kept = [g for g, r in zip(groups, rewards, strict=True) if not is_zero_variance(r)]
    dropped = [g for g, r in zip(groups, rewards, strict=True) if is_zero_variance(r)]
    return FilterResult(kept=kept, dropped=dropped)


@dataclass
class DynamicSampler(Generic[T]):
    """DAPO dynamic sampling: accumulate non-zero-variance groups over generation rounds until
    ``target_groups`` are collected or ``max_rounds`` rounds were spent.

    Use: ``while sampler.needs_more: sampler.add(generate(n), rewards)``, then ``batch = sampler.take()``.
    ``take`` returns at most ``target_groups`` groups (fewer if the rounds ran out); surplus groups from the
    last round are discarded and counted in ``n_surplus``. ``take`` resets the round counter.
    """

    target_groups: int
    max_rounds: int
    rounds: int = 0
    n_dropped: int = 0
    n_surplus: int = 0
    _buffer: list[T] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.target_groups < 1 or self.max_rounds < 1:
            raise ValueError("target_groups and max_rounds must be >= 1")

    @property
    def n_ready(self) -> int:
        """Groups collected so far for the current batch."""
        return len(self._buffer)

    @property
    def needs_more(self) -> bool:
        """True while the batch is short and another generation round is allowed."""
        return self.n_ready < self.target_groups and self.rounds < self.max_rounds

    def add(self, groups: Sequence[T], rewards: Sequence[Sequence[float]]) -> FilterResult[T]:
        """Add one generation round; zero-variance groups are dropped."""
        result = drop_zero_variance(groups, rewards)
        self.rounds += 1
        self.n_dropped += len(result.dropped)
        self._buffer.extend(result.kept)
        return result

    def take(self) -> list[T]:
        """The batch (first ``target_groups`` kept groups, in arrival order); resets for the next batch."""
        batch, surplus = self._buffer[: self.target_groups], self._buffer[self.target_groups :]
        self.n_surplus += len(surplus)
        self._buffer = []
        self.rounds = 0
        return batch
