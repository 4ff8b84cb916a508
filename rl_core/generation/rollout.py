"""The rollout record the generator hands to the trainer, and the response row every generator backend builds it
from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rl_core.algorithms.length import ForcedInterruption, TokenBudget

__all__ = ["ResponseRow", "Rollout"]


@dataclass
class Rollout:
    """One sampled response to one prompt.

    Invariants: ``response_ids``, ``logprobs``, ``versions``, ``loss_mask`` and ``injected`` have equal lengths.
    ``logprobs[t]`` is log pi(y_t | prefix) in float32 under the tempered (``sampling.temperature``),
    un-truncated (no top-p) distribution of the weights that produced the token, i.e. what
    ``token_logprobs(..., temperature=T)`` computes; it is 0.0 for injected tokens. ``versions[t]`` is the
    policy version whose forward pass produced the logits of token t (injected tokens: the version current when
    they were fed). ``loss_mask[t]`` is False for injected tokens when the recipe masks them.
    ``finish_reason``: ``eos`` (an EOS/stop token, included in ``response_ids``), ``answer_budget`` or
    ``length`` (truncations: no answer). ``text`` decodes the response without the final EOS/stop token and
    keeps ``<think>``/``</think>``.
    """

    problem_id: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    versions: list[int]
    loss_mask: list[bool]
    finish_reason: str
    truncated: bool
    interrupted: bool
    text: str
    injected: list[bool] = field(default_factory=list)
    #: index of the prompt in the ``generate`` call and of this sample among its n (rollouts are grouped)
    prompt_index: int = 0
    sample_index: int = 0

    @property
    def min_version(self) -> int:
        """Oldest policy version among the response's tokens (staleness accounting); -1 if empty."""
        return min(self.versions) if self.versions else -1


class ResponseRow:
    """One response under construction, the same for every generator backend: the length controller ``ctl``, the
    tokens so far with their log-probs (0.0 when injected), policy versions and injection flags, and whether the
    row is done (``truncated_by_cap``: the hard cap ended it before the controller did)."""

    __slots__ = ("ctl", "done", "ids", "injected", "logprobs", "truncated_by_cap", "versions")

    def __init__(self, ctl: ForcedInterruption | TokenBudget) -> None:
        self.ctl = ctl
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.injected: list[bool] = []
        self.done = False
        self.truncated_by_cap = False

    def append(self, token: int, logprob: float, version: int, injected: bool) -> None:
        """Record one response token."""
        self.ids.append(int(token))
        self.logprobs.append(float(logprob))
        self.versions.append(int(version))
        self.injected.append(injected)

    def finish(self) -> None:
        """Mark the row done: by the controller, or (if the controller is not done) by the hard cap."""
        self.done = True
        self.truncated_by_cap = not self.ctl.done

    def to_rollout(
        self, *, problem_id: str, prompt_ids: Sequence[int], text: str, prompt_index: int, sample_index: int
    ) -> Rollout:
        """The finished row as a ``Rollout``: the finish reason, truncation, interruption and loss mask come from
        the length controller, unless the hard cap cut the row first."""
        ctl = self.ctl
        if self.truncated_by_cap:
            reason, truncated = "length", True
        else:
            reason, truncated = str(ctl.finish_reason.value if ctl.finish_reason else "length"), ctl.truncated
        return Rollout(
            problem_id=problem_id,
            prompt_ids=list(prompt_ids),
            response_ids=list(self.ids),
            logprobs=list(self.logprobs),
            versions=list(self.versions),
            loss_mask=ctl.loss_mask()[: len(self.ids)],
            finish_reason=reason,
            truncated=truncated,
            interrupted=ctl.interrupted,
            text=text,
            injected=list(self.injected),
            prompt_index=prompt_index,
            sample_index=sample_index,
        )
