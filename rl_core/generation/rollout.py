"""The rollout record the generator hands to the trainer."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Rollout"]


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
    def n_sampled(self) -> int:
        """Number of response tokens the policy sampled (not injected)."""
        return len(self.response_ids) - sum(self.injected)

    @property
    def min_version(self) -> int:
        """Oldest policy version among the response's tokens (staleness accounting); -1 if empty."""
        return min(self.versions) if self.versions else -1
