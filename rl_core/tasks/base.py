"""The task interface: problems with a reference answer and a verifiable reward.

Invariants:
- A ``Problem`` is immutable; ``id`` is unique within a task (across both splits) and stable for a given config.
- ``Task.reward`` is a pure function of (problem, completion) returning exactly 1.0 (correct) or 0.0 (wrong);
  the recipe maps it to ±1 or 1/0 (``reward.scheme``).
- The reward looks only at the *answer*: the text after the last ``</think>``. A completion that opens
  ``<think>`` and never closes it has no answer and is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Split = Literal["train", "validation"]
SPLITS: tuple[Split, ...] = ("train", "validation")

THINK_START = "<think>"
THINK_END = "</think>"


@dataclass(frozen=True)
class Problem:
    """One prompt and its reference answer (``answer``)."""

    id: str
    prompt: str
    answer: str


@runtime_checkable
class Task(Protocol):
    """Verifiable task: fixed train/validation problem lists and a 0/1 reward."""

    name: str

    def problems(self, split: Split) -> Sequence[Problem]: ...

    def reward(self, problem: Problem, completion: str) -> float: ...


def extract_answer(completion: str) -> str | None:
    """The answer part of a completion: the text after the last ``</think>``, stripped.

    Without any ``</think>``: None if the completion opened ``<think>`` (thinking never ended), else the whole
    completion stripped (a model that does not think).
    """
    end = completion.rfind(THINK_END)
    if end >= 0:
        return completion[end + len(THINK_END) :].strip()
    if THINK_START in completion:
        return None
    return completion.strip()


def check_split(split: str) -> Split:
    """``split`` if it is a known split name, else a ValueError naming the allowed ones."""
    if split == "train":
        return "train"
    if split == "validation":
        return "validation"
    raise ValueError(f"unknown split {split!r} (allowed: {', '.join(SPLITS)})")
