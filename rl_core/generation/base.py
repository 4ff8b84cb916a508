"""What every generator backend shares (the torch ``Generator`` and ``VLLMGenerator``): the ``generate`` call and
its counters, the prompt codec, the policy version and the weight polling.

A backend implements ``_sample(prompts, n, encoded, weights)`` (the rollouts of one call, grouped by problem, in
input order) and ``load_weights(version, state)``; ``generate`` checks ``n``, sets the version, times the call and
updates ``stats``.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from torch import Tensor
from transformers import PreTrainedTokenizerBase

from rl_core.generation.codec import TokenCodec
from rl_core.generation.rollout import Rollout
from rl_core.recipe import Recipe
from rl_core.tasks.base import Problem

if TYPE_CHECKING:
    from typing import Self

__all__ = ["BaseGenerator", "GenerationStats", "WeightSource", "require_positive"]

#: Polled between decode steps: None (no new weights) or (version, name -> tensor).
WeightSource = Callable[[], tuple[int, Mapping[str, Tensor]] | None]


@dataclass
class GenerationStats:
    """Cumulative counters of one generator (for throughput and compute accounting)."""

    calls: int = 0
    rollouts: int = 0
    prompt_tokens: int = 0
    response_tokens: int = 0
    forward_passes: int = 0
    weight_updates: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        """Response tokens per second of generation wall time."""
        return self.response_tokens / self.seconds if self.seconds > 0 else 0.0

    def count_call(self, rollouts: Sequence[Rollout], seconds: float) -> None:
        """Add one ``generate`` call that returned ``rollouts`` in ``seconds``."""
        self.calls += 1
        self.rollouts += len(rollouts)
        self.prompt_tokens += sum(len(r.prompt_ids) for r in rollouts)
        self.response_tokens += sum(len(r.response_ids) for r in rollouts)
        self.seconds += seconds


def require_positive(**values: int | None) -> None:
    """Raise ``ValueError("<name> must be >= 1")`` for the first given value below 1 (None is allowed)."""
    for name, value in values.items():
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1")


class BaseGenerator(ABC):
    """The surface and bookkeeping common to the generator backends (see module doc)."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        recipe: Recipe,
        max_new_tokens: int | None,
        seed: int,
        stop_token_ids: Sequence[int],
        use_chat_template: bool,
        /,
    ) -> None:
        require_positive(max_new_tokens=max_new_tokens)
        self.tokenizer = tokenizer
        self.recipe = recipe
        self.max_new_tokens = max_new_tokens
        self.version = 0
        self.stats = GenerationStats()
        self._rng = random.Random(seed)
        self.codec = TokenCodec(
            tokenizer, stop_token_ids=stop_token_ids, length=recipe.length, use_chat_template=use_chat_template
        )
        self.stop_ids = self.codec.stop_ids

    # -- encoding -----------------------------------------------------------------------------------------

    def prompt_ids(self, problem: Problem) -> list[int]:
        """Token ids of a problem's prompt (special tokens and, if enabled, the chat template included)."""
        return self.codec.prompt_ids(problem)

    def decode(self, ids: Sequence[int]) -> str:
        """Response text: a final EOS/stop token is dropped, ``<think>`` markers are kept."""
        return self.codec.decode(ids)

    # -- lifetime -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Release what the backend holds (nothing by default; the vLLM backend stops its engine)."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- weights ------------------------------------------------------------------------------------------

    @abstractmethod
    def load_weights(self, version: int, state: Mapping[str, Tensor]) -> None:
        """Load ``state`` (HF state-dict names) in place and make ``version`` the current policy version."""

    def _poll(self, weights: WeightSource | None) -> None:
        """Load the update ``weights()`` returns, if any."""
        if weights is None:
            return
        update = weights()
        if update is not None:
            self.load_weights(*update)

    # -- generation ---------------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[Problem],
        n: int,
        *,
        weights: WeightSource | None = None,
        version: int | None = None,
    ) -> list[Rollout]:
        """``n`` rollouts per problem, grouped by problem, in input order.

        ``version`` (if given) is the policy version of the model's current weights; otherwise the generator's
        current version (0, or the last loaded one) is used. ``weights`` is polled before the first forward pass
        and between engine/decode steps (see the backend's module doc).
        """
        if n < 1:
            raise ValueError("n must be >= 1")
        if version is not None:
            self.version = int(version)
        started = time.perf_counter()
        encoded = [self.prompt_ids(p) for p in prompts]
        rollouts = self._sample(prompts, n, encoded, weights)
        self.stats.count_call(rollouts, time.perf_counter() - started)
        return rollouts

    @abstractmethod
    def _sample(
        self, prompts: Sequence[Problem], n: int, encoded: list[list[int]], weights: WeightSource | None
    ) -> list[Rollout]:
        """The rollouts of one ``generate`` call (``encoded``: each problem's prompt ids)."""
