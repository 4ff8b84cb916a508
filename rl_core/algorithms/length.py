"""Length control for generation: forced thinking interruption (ScaleRL), a plain token cap, DAPO's soft
overlong penalty, and truncation statistics.

The controllers are per-sequence state machines for a token-level sampling loop and know nothing about
tokenizers: they take token ids. The engine calls ``observe(token)`` after each *sampled* token and must
append (force-feed, not sample) any ``Step.inject`` ids, then stop when ``Step.done`` is true:

    ctl = make_length_controller(recipe.length, rng=rng, phrase_ids=tok(phrase),
                                 think_end_ids=tok("</think>"), eos_ids={eos})
    while True:
        step = ctl.observe(sample_next())
        feed(step.inject)          # usually empty
        if step.done: break
    mask = ctl.loss_mask()         # False on injected tokens when masking is on

Forced interruption: thinking runs until ``</think>`` or until ``thinking_budget`` sampled thinking tokens; at
the budget the phrase (which ends with ``</think>``) is injected. Either way the answer then gets
``answer_budget`` sampled tokens; running out of it without EOS is a truncation.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import torch
from torch import Tensor

from rl_core.recipe.model import INTERRUPTION_PHRASE, LengthConfig

__all__ = [
    "INTERRUPTION_PHRASE",
    "FinishReason",
    "ForcedInterruption",
    "LengthController",
    "LengthStats",
    "Phase",
    "Step",
    "TokenBudget",
    "length_stats",
    "make_length_controller",
    "overlong_penalty",
    "sample_thinking_budget",
    "truncation_rate",
]


class Phase(str, Enum):
    """Where a response is: thinking, answering (after ``</think>``), or done."""

    THINKING = "thinking"
    ANSWERING = "answering"
    DONE = "done"


class FinishReason(str, Enum):
    """Why a response ended. ``answer_budget`` and ``length`` are truncations (no EOS)."""

    EOS = "eos"
    ANSWER_BUDGET = "answer_budget"
    LENGTH = "length"


@dataclass(frozen=True)
class Step:
    """What the sampling loop must do after a token: append ``inject`` ids (if any); stop if ``done``."""

    inject: tuple[int, ...] = ()
    done: bool = False


class LengthController(Protocol):
    """Common interface of the per-sequence length controllers."""

    def observe(self, token_id: int) -> Step: ...

    @property
    def done(self) -> bool: ...

    @property
    def truncated(self) -> bool: ...

    @property
    def interrupted(self) -> bool: ...

    @property
    def finish_reason(self) -> FinishReason | None: ...

    @property
    def response_ids(self) -> list[int]: ...

    def loss_mask(self) -> list[bool]: ...


def sample_thinking_budget(rng: random.Random, low: int, high: int) -> int:
    """A thinking budget drawn uniformly from the integers low..high (inclusive)."""
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got {low}, {high}")
    return rng.randint(low, high)


class _Base:
    def __init__(self, eos_ids: Collection[int]) -> None:
        self._eos = frozenset(eos_ids)
        self._ids: list[int] = []
        self._injected: list[bool] = []
        self._reason: FinishReason | None = None
        self._interrupted = False

    @property
    def done(self) -> bool:
        """True once the response has ended."""
        return self._reason is not None

    @property
    def truncated(self) -> bool:
        """True if the response ended by running out of tokens rather than at EOS."""
        return self._reason in (FinishReason.ANSWER_BUDGET, FinishReason.LENGTH)

    @property
    def interrupted(self) -> bool:
        """True if the interruption phrase was injected."""
        return self._interrupted

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the response ended (None while running)."""
        return self._reason

    @property
    def response_ids(self) -> list[int]:
        """Every response token so far, sampled and injected, in order."""
        return list(self._ids)

    @property
    def injected(self) -> list[bool]:
        """Per response token: True where the token was injected rather than sampled."""
        return list(self._injected)

    def _push(self, token_id: int) -> None:
        if self._reason is not None:
            raise RuntimeError("observe() called after the response finished")
        self._ids.append(int(token_id))
        self._injected.append(False)


class TokenBudget(_Base):
    """A plain cap of ``max_tokens`` sampled tokens (length modes ``none`` and ``overlong_penalty``)."""

    def __init__(self, *, max_tokens: int, eos_ids: Collection[int]) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        super().__init__(eos_ids)
        self.max_tokens = max_tokens

    def observe(self, token_id: int) -> Step:
        """Record a sampled token; done at EOS or when ``max_tokens`` tokens were sampled (truncation)."""
        self._push(token_id)
        if token_id in self._eos:
            self._reason = FinishReason.EOS
        elif len(self._ids) >= self.max_tokens:
            self._reason = FinishReason.LENGTH
        return Step(done=self.done)

    def loss_mask(self) -> list[bool]:
        """Every token is in the loss."""
        return [True] * len(self._ids)


class ForcedInterruption(_Base):
    """Forced length interruption state machine (see module doc).

    Invariants: at most ``thinking_budget`` sampled thinking tokens; at most ``answer_budget`` sampled answer
    tokens; the phrase is injected at most once and only if thinking did not end by itself.
    """

    def __init__(
        self,
        *,
        thinking_budget: int,
        answer_budget: int,
        phrase_ids: Sequence[int],
        think_end_ids: Sequence[int],
        eos_ids: Collection[int],
        mask_injected: bool = True,
    ) -> None:
        if thinking_budget < 1 or answer_budget < 1:
            raise ValueError("thinking_budget and answer_budget must be >= 1")
        if not phrase_ids or not think_end_ids:
            raise ValueError("phrase_ids and think_end_ids must be non-empty")
        super().__init__(eos_ids)
        self.thinking_budget = thinking_budget
        self.answer_budget = answer_budget
        self.phrase_ids = tuple(int(t) for t in phrase_ids)
        self.think_end_ids = tuple(int(t) for t in think_end_ids)
        self.mask_injected = mask_injected
        self.phase = Phase.THINKING
        self.n_thinking = 0
        self.n_answer = 0

    @property
    def max_total_tokens(self) -> int:
        """Upper bound on the response length, injected tokens included (for the engine's hard cap)."""
        return self.thinking_budget + len(self.phrase_ids) + self.answer_budget

    @property
    def injected_span(self) -> tuple[int, int] | None:
        """[start, end) positions of the injected phrase in ``response_ids``, or None."""
        if not self._interrupted:
            return None
        start = self._injected.index(True)
        return start, start + len(self.phrase_ids)

    def _thinking_ended(self) -> bool:
        n = len(self.think_end_ids)
        return len(self._ids) >= n and tuple(self._ids[-n:]) == self.think_end_ids

    def observe(self, token_id: int) -> Step:
        """Record one sampled token and say whether to inject the phrase now or stop."""
        self._push(token_id)
        if token_id in self._eos:
            self._reason = FinishReason.EOS
            self.phase = Phase.DONE
            return Step(done=True)
        if self.phase is Phase.THINKING:
            self.n_thinking += 1
            if self._thinking_ended():
                self.phase = Phase.ANSWERING
                return Step()
            if self.n_thinking >= self.thinking_budget:
                self._ids.extend(self.phrase_ids)
                self._injected.extend([True] * len(self.phrase_ids))
                self._interrupted = True
                self.phase = Phase.ANSWERING
                return Step(inject=self.phrase_ids)
            return Step()
        self.n_answer += 1
        if self.n_answer >= self.answer_budget:
            self._reason = FinishReason.ANSWER_BUDGET
            self.phase = Phase.DONE
            return Step(done=True)
        return Step()

    def loss_mask(self) -> list[bool]:
        """Per response token: False on injected tokens when ``mask_injected``, else True."""
        if not self.mask_injected:
            return [True] * len(self._ids)
        return [not inj for inj in self._injected]


def make_length_controller(
    cfg: LengthConfig,
    *,
    rng: random.Random,
    phrase_ids: Sequence[int],
    think_end_ids: Sequence[int],
    eos_ids: Collection[int],
) -> ForcedInterruption | TokenBudget:
    """The controller a recipe's ``length`` section asks for; ``phrase_ids`` tokenises
    ``cfg.interruption.phrase``. Non-interruption modes cap at ``max_response_tokens``."""
    if cfg.mode == "interruption":
        icfg = cfg.interruption
        return ForcedInterruption(
            thinking_budget=sample_thinking_budget(rng, icfg.budget_min, icfg.budget_max),
            answer_budget=icfg.answer_budget,
            phrase_ids=phrase_ids,
            think_end_ids=think_end_ids,
            eos_ids=eos_ids,
            mask_injected=icfg.mask_injected,
        )
    return TokenBudget(max_tokens=cfg.max_response_tokens, eos_ids=eos_ids)


def truncation_rate(truncated: Sequence[bool]) -> float:
    """Share of responses that ran out of tokens (0 for an empty batch)."""
    return sum(bool(t) for t in truncated) / len(truncated) if truncated else 0.0


@dataclass(frozen=True)
class LengthStats:
    """Batch length statistics; the paper keeps ``truncation_rate`` under 5% (10-15% destabilised runs)."""

    n: int
    truncation_rate: float
    interruption_rate: float
    mean_length: float
    max_length: int


def length_stats(controllers: Sequence[LengthController]) -> LengthStats:
    """Statistics over finished controllers (lengths count injected tokens)."""
    lengths = [len(c.response_ids) for c in controllers]
    n = len(controllers)
    return LengthStats(
        n=n,
        truncation_rate=truncation_rate([c.truncated for c in controllers]),
        interruption_rate=sum(c.interrupted for c in controllers) / n if n else 0.0,
        mean_length=sum(lengths) / n if n else 0.0,
        max_length=max(lengths, default=0),
    )


def overlong_penalty(lengths: Tensor, max_tokens: int, cache_tokens: int, penalty: float = 1.0) -> Tensor:
    """DAPO soft overlong punishment, added to the reward:
    0 if L <= max - cache; penalty·(max - cache - L)/cache if max - cache < L <= max; -penalty if L > max."""
    if not 0 < cache_tokens < max_tokens:
        raise ValueError(f"need 0 < cache_tokens < max_tokens, got {cache_tokens}, {max_tokens}")
    length = lengths.to(torch.float64)
    soft = float(max_tokens - cache_tokens)
    ramp = (soft - length) / cache_tokens
    out = torch.where(length <= soft, torch.zeros_like(length), ramp)
    out = torch.where(length > max_tokens, torch.full_like(length, -1.0), out)
    return (penalty * out).to(torch.float32)
