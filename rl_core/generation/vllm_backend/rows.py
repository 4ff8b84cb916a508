"""Per-sequence state of the vLLM backend: the length controller, the tokens so far, and what to ask vLLM next.

A row is one rollout. It is served by one vLLM request, or by several when the length controller injects the
interruption phrase: the running request is aborted at the budget and a continuation request is queued with
``prompt + response so far (phrase included)`` as its prompt. Every accepted token records its log-prob (0.0 when
injected) and the policy version of the step that produced it; the row ends exactly where the torch
``Generator``'s would (controller done, or the hard cap; tokens vLLM produced past that point are ignored).
"""

from __future__ import annotations

from enum import Enum

from rl_core.algorithms.length import ForcedInterruption, TokenBudget
from rl_core.generation.rollout import ResponseRow, Rollout

__all__ = ["Next", "Row"]


class Next(str, Enum):
    """What the generator does after a row accepted a token."""

    CONTINUE = "continue"  # keep the current request running
    RESUBMIT = "resubmit"  # the phrase was injected: abort the request, continue from the new context
    FINISH = "finish"  # the row is complete: abort the request if vLLM has not finished it


class Row(ResponseRow):
    """One response under construction (see module doc): the shared row plus its prompt, cap, seed and requests."""

    def __init__(
        self,
        ctl: ForcedInterruption | TokenBudget,
        *,
        prompt_ids: list[int],
        cap: int,
        seed: int,
        prompt_index: int,
        sample_index: int,
    ) -> None:
        super().__init__(ctl)
        self.prompt_ids = prompt_ids
        self.cap = cap
        self.seed = seed
        self.prompt_index = prompt_index
        self.sample_index = sample_index
        self.segment = 0  # number of vLLM requests this row has used

    @property
    def context(self) -> list[int]:
        """Prompt plus response so far: the prompt of a continuation request."""
        return self.prompt_ids + self.ids

    @property
    def remaining(self) -> int:
        """Tokens the hard cap still allows."""
        return self.cap - len(self.ids)

    def request_seed(self) -> int:
        """Sampling seed of the row's current request (one per segment, derived from the row's seed)."""
        return (self.seed + 1_000_003 * self.segment) % (1 << 63)

    def accept(self, token: int, logprob: float, version: int) -> Next:
        """Record one token vLLM sampled (from logits of policy ``version``) and say what comes next."""
        if self.done:
            raise RuntimeError("accept() on a finished row")
        self.append(token, logprob, version, injected=False)
        step = self.ctl.observe(int(token))
        for tok in step.inject:
            if len(self.ids) >= self.cap:
                break
            self.append(tok, 0.0, version, injected=True)
        if self.ctl.done or len(self.ids) >= self.cap:
            self.finish()
            return Next.FINISH
        return Next.RESUBMIT if step.inject else Next.CONTINUE

    def end_early(self) -> None:
        """vLLM finished the request before the controller or the cap did (the context length ran out)."""
        if not self.done:
            self.finish()

    def rollout(self, problem_id: str, text: str) -> Rollout:
        """The finished row as a ``Rollout`` (same fields and invariants as the torch generator's)."""
        return self.to_rollout(
            problem_id=problem_id,
            prompt_ids=self.prompt_ids,
            text=text,
            prompt_index=self.prompt_index,
            sample_index=self.sample_index,
        )
