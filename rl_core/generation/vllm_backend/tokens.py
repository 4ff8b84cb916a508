"""Prompt encoding and response decoding with rl_core's tokenizer (vLLM runs without one: ids in, ids out).

Same rules as the torch ``Generator``: special tokens (``<bos>``) and, if enabled, the chat template in the
prompt; ``length.max_prompt_tokens`` enforced; the decoded text drops a final EOS/stop token and keeps
``<think>`` markers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from transformers import PreTrainedTokenizerBase

from rl_core.tasks.base import Problem

__all__ = ["TokenCodec"]


class TokenCodec:
    """Token ids of prompts and phrases, and response text, for one tokenizer."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        stop_token_ids: Sequence[int],
        max_prompt_tokens: int,
        use_chat_template: bool,
    ) -> None:
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id
        self.stop_ids: frozenset[int] = frozenset(int(t) for t in stop_token_ids) | (
            frozenset() if eos is None else frozenset([int(eos)])
        )
        if not self.stop_ids:
            raise ValueError("the tokenizer has no eos token: pass stop_token_ids")
        self.max_prompt_tokens = max_prompt_tokens
        self.use_chat_template = use_chat_template

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
