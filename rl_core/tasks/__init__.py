"""Verifiable tasks behind one interface: fixed train/validation problems and a 0/1 reward.

- ``Problem(id, prompt, answer)``; ``Task`` protocol: ``name``, ``problems(split)``, ``reward(problem, completion)``.
- ``build_task(config)`` for a ``TaskConfig`` (``kind``: ``synthetic-addition``, ``synthetic-sort``,
  ``synthetic-modular``, ``math``) or a mapping (validated; errors name the bad key).
- Synthetic tasks also give worked demonstrations for the supervised warm-up of the base checkpoint.
- ``extract_answer`` strips the thinking part; ``answers_match`` is the math checker.

How to add a task: ``docs/engine-core.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl_core.tasks.base import SPLITS, THINK_END, THINK_START, Problem, Split, Task, extract_answer
from rl_core.tasks.config import (
    AdditionTaskConfig,
    MathTaskConfig,
    ModularTaskConfig,
    SortTaskConfig,
    SyntheticTaskConfig,
    TaskConfig,
    parse_task_config,
)
from rl_core.tasks.math import MathTask, load_math_jsonl
from rl_core.tasks.math_check import answers_match, have_math_verify
from rl_core.tasks.synthetic import SyntheticTask

__all__ = [
    "SPLITS",
    "THINK_END",
    "THINK_START",
    "AdditionTaskConfig",
    "MathTask",
    "MathTaskConfig",
    "ModularTaskConfig",
    "Problem",
    "SortTaskConfig",
    "Split",
    "SyntheticTask",
    "SyntheticTaskConfig",
    "Task",
    "TaskConfig",
    "answers_match",
    "build_task",
    "extract_answer",
    "have_math_verify",
    "load_math_jsonl",
    "parse_task_config",
]


def build_task(config: TaskConfig | Mapping[str, Any]) -> SyntheticTask | MathTask:
    """The task a config describes (a mapping is validated first)."""
    cfg = parse_task_config(config)
    if isinstance(cfg, MathTaskConfig):
        return MathTask(cfg)
    return SyntheticTask(cfg)
