"""Prompt encoding, response decoding and the length controller of one tokenizer: shared by every generator
backend (the torch ``Generator`` and ``VLLMGenerator``, which runs vLLM without a tokenizer: ids in, ids out).

Rules: special tokens (``<bos>``) and, if enabled, the chat template in the prompt; ``length.max_prompt_tokens``
enforced; the decoded text drops a final EOS/stop token and keeps ``<think>`` markers; stop ids are the tokenizer's
EOS plus ``stop_token_ids``; a response's hard cap is the controller's natural limit, bounded by ``max_new_tokens``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import cast

from transformers import PreTrainedTokenizerBase

from rl_core.algorithms.length import ForcedInterruption, TokenBudget, make_length_controller
from rl_core.recipe.model import LengthConfig
from rl_core.tasks.base import THINK_END, Problem

__all__ = ["TokenCodec"]


class TokenCodec:
    """Token ids of prompts and phrases, and response text, for one tokenizer."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        stop_token_ids: Sequence[int],
        length: LengthConfig,
        use_chat_template: bool,
    ) -> None:
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id
        self.stop_ids: frozenset[int] = frozenset(int(t) for t in stop_token_ids) | (
            frozenset() if eos is None else frozenset([int(eos)])
        )
        if not self.stop_ids:
            raise ValueError("the tokenizer has no eos token: pass stop_token_ids")
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else min(self.stop_ids)
        self.length = length
        self.max_prompt_tokens = length.max_prompt_tokens
        self.use_chat_template = use_chat_template
        self.phrase_ids = self.encode(length.interruption.phrase)
        self.think_end_ids = self.encode(THINK_END)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special tokens (phrases, markers)."""
        return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def prompt_ids(self, problem: Problem) -> list[int]:
        """Token ids of a problem's prompt; raises if longer than ``length.max_prompt_tokens``."""
        if self.use_chat_template:
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": problem.prompt}], add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, Mapping):
                ids = ids["input_ids"]
            out = [int(t) for t in cast(Sequence[int], ids)]
        else:
            out = [int(t) for t in self.tokenizer(problem.prompt)["input_ids"]]
        if len(out) > self.max_prompt_tokens:
            raise ValueError(
                f"prompt of problem {problem.id!r} has {len(out)} tokens, "
                f"more than length.max_prompt_tokens={self.max_prompt_tokens}"
            )
        return out

    def decode(self, ids: Sequence[int]) -> str:
        """Response text: a final EOS/stop token is dropped, ``<think>`` markers are kept."""
        body = list(ids[:-1]) if ids and ids[-1] in self.stop_ids else list(ids)
        return cast(str, self.tokenizer.decode(body, skip_special_tokens=False, clean_up_tokenization_spaces=False))

    def controller(self, rng: random.Random) -> ForcedInterruption | TokenBudget:
        """A fresh length controller for one response (the recipe's ``length`` section)."""
        return make_length_controller(
            self.length, rng=rng, phrase_ids=self.phrase_ids, think_end_ids=self.think_end_ids, eos_ids=self.stop_ids
        )


def response_cap(ctl: ForcedInterruption | TokenBudget, max_new_tokens: int | None) -> int:
    """A response's hard cap: the controller's natural limit, bounded by ``max_new_tokens`` when given."""
    natural = ctl.max_total_tokens if isinstance(ctl, ForcedInterruption) else ctl.max_tokens
    return natural if max_new_tokens is None else min(natural, max_new_tokens)
