"""From scored rollouts to the trainer's tensors, applying the recipe's rewards, filters and advantages.

A ``Sample`` is one generated response, as it crossed the process boundary: token ids, the generator's per-token
log-probs (the *old* policy of the importance ratio), the policy version that produced each token, the loss mask
(injected interruption tokens are 0), and the verifier's verdict. A ``Group`` is the G samples of one prompt.

``build_train_batch`` is pure data → tensors. Layout of the sequences: each row is
``[left pad][prompt][response][right pad]`` so one forward gives log pi of every response token; response token j
of row i sits at column ``prompt_width + j`` of ``input_ids`` and its log-prob at column ``prompt_width + j - 1`` of
the shifted log-prob matrix (``response_slice``). All [B, T] tensors returned are aligned on response tokens.

Invariants: rewards, zero-variance filtering and advantages follow the recipe exactly in the order documented in
``docs/algorithms.md`` (filter first, then normalise over what enters the loss); the aggregation weights are
computed once on the whole batch (``token_weights``) so any micro-batch split of the rows is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from rl_core.algorithms.advantages import compute_advantages, recipe_rewards
from rl_core.algorithms.aggregation import token_weights
from rl_core.algorithms.filters import is_zero_variance
from rl_core.recipe.model import Recipe


@dataclass(frozen=True)
class Sample:
    problem_id: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    loss_mask: list[int]
    correct: bool
    truncated: bool = False
    interrupted: bool = False

    def __post_init__(self) -> None:
        n = len(self.response_ids)
        if not self.prompt_ids:
            raise ValueError(f"sample {self.problem_id}: empty prompt (the first response token needs a context)")
        if not (len(self.logprobs) == len(self.versions) == len(self.loss_mask) == n):
            raise ValueError(
                f"sample {self.problem_id}: response_ids/logprobs/versions/loss_mask lengths differ "
                f"({n}, {len(self.logprobs)}, {len(self.versions)}, {len(self.loss_mask)})"
            )


@dataclass(frozen=True)
class Group:
    problem_id: str
    samples: tuple[Sample, ...]
    batch_index: int = 0


@dataclass
class TrainBatch:
    """Right-aligned tensors for one optimiser step (see module doc). Row i belongs to prompt ``group_ids[i]``."""

    input_ids: Tensor  # [B, W] long
    attention_mask: Tensor  # [B, W] long
    prompt_width: int
    old_logprobs: Tensor  # [B, T] float32, response-aligned
    mask: Tensor  # [B, T] float32 loss mask
    versions: Tensor  # [B, T] long
    advantages: Tensor  # [B] float32
    group_ids: Tensor  # [B] long
    weights: Tensor  # [B, T] float32 aggregation weights (batch-global)
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def response_width(self) -> int:
        return int(self.mask.shape[1])

    def response_slice(self) -> slice:
        """Columns of the shifted [B, W-1] log-prob matrix that hold response tokens."""
        return slice(self.prompt_width - 1, self.prompt_width - 1 + self.response_width)


def group_rewards(groups: Sequence[Group], recipe: Recipe) -> list[list[float]]:
    """The recipe's reward of every sample, per group (truncated responses count as wrong)."""
    out = []
    for g in groups:
        correct = torch.tensor([s.correct and not s.truncated for s in g.samples])
        lengths = torch.tensor([len(s.response_ids) for s in g.samples], dtype=torch.float32)
        out.append([float(r) for r in recipe_rewards(correct, lengths, recipe.reward, recipe.length)])
    return out


def rollout_stats(
    groups: Sequence[Group], rewards: Sequence[Sequence[float]], trainer_version: int
) -> dict[str, float]:
    """Training metrics over every generated sample (before filtering): reward, pass rate, truncation and
    interruption rates, lengths, staleness (trainer version − token version over sampled tokens)."""
    samples = [s for g in groups for s in g.samples]
    n = max(1, len(samples))
    flat_rewards = [r for rs in rewards for r in rs]
    stale = [trainer_version - v for s in samples for v, m in zip(s.versions, s.loss_mask, strict=True) if m]
    mixed = sum(1 for s in samples if len(set(s.versions)) > 1)
    lengths = [len(s.response_ids) for s in samples]
    return {
        "train/reward_mean": sum(flat_rewards) / max(1, len(flat_rewards)),
        "train/pass_rate": sum(s.correct and not s.truncated for s in samples) / n,
        "train/truncation_rate": sum(s.truncated for s in samples) / n,
        "train/interruption_rate": sum(s.interrupted for s in samples) / n,
        "train/response_length_mean": sum(lengths) / n,
        "train/response_length_max": float(max(lengths, default=0)),
        "train/staleness_mean": sum(stale) / max(1, len(stale)),
        "train/staleness_max": float(max(stale, default=0)),
        "train/mixed_version_fraction": mixed / n,
        "train/samples": float(len(samples)),
        "train/groups": float(len(groups)),
    }


def build_train_batch(
    groups: Sequence[Group], rewards: Sequence[Sequence[float]], recipe: Recipe, *, pad_id: int
) -> TrainBatch | None:
    """Filter, compute advantages and pack tensors; None when no group survives (nothing to train on).

    ``filters.zero_variance``: ``drop`` and ``dynamic_sampling`` remove zero-variance groups (dynamic sampling's
    refill happens before, in the engine); ``none`` keeps them (their tokens count in the normalisers).
    """
    if len(groups) != len(rewards):
        raise ValueError(f"{len(groups)} groups but {len(rewards)} reward lists")
    keep = [
        (g, r)
        for g, r in zip(groups, rewards, strict=True)
        if recipe.filters.zero_variance == "none" or not is_zero_variance(r)
    ]
    stats = {"train/zero_variance_fraction": sum(is_zero_variance(r) for r in rewards) / max(1, len(rewards))}
    if not keep:
        return None
    samples = [s for g, _ in keep for s in g.samples]
    gids = torch.tensor([gi for gi, (g, _) in enumerate(keep) for _ in g.samples], dtype=torch.long)
    flat_rewards = torch.tensor([r for _, rs in keep for r in rs], dtype=torch.float32)
    adv = compute_advantages(
        flat_rewards, gids, recipe.advantage.normalization, std_eps=recipe.advantage.std_eps
    ).float()
    p_width = max(len(s.prompt_ids) for s in samples)
    r_width = max(1, max(len(s.response_ids) for s in samples))
    b = len(samples)
    input_ids = torch.full((b, p_width + r_width), pad_id, dtype=torch.long)
    attn = torch.zeros((b, p_width + r_width), dtype=torch.long)
    old = torch.zeros((b, r_width), dtype=torch.float32)
    mask = torch.zeros((b, r_width), dtype=torch.float32)
    versions = torch.zeros((b, r_width), dtype=torch.long)
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        input_ids[i, p_width - p : p_width] = torch.tensor(s.prompt_ids, dtype=torch.long)
        attn[i, p_width - p : p_width + r] = 1
        if r:
            input_ids[i, p_width : p_width + r] = torch.tensor(s.response_ids, dtype=torch.long)
            old[i, :r] = torch.tensor(s.logprobs, dtype=torch.float32)
            mask[i, :r] = torch.tensor(s.loss_mask, dtype=torch.float32)
            versions[i, :r] = torch.tensor(s.versions, dtype=torch.long)
    weights = token_weights(mask, gids, recipe.loss.aggregation)
    stats["train/loss_tokens"] = float(mask.sum())
    stats["train/advantage_abs_mean"] = float(adv.abs().mean())
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attn,
        prompt_width=p_width,
        old_logprobs=old,
        mask=mask,
        versions=versions,
        advantages=adv,
        group_ids=gids,
        weights=weights,
        stats=stats,
    )
