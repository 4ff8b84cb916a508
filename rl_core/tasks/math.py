"""The ``math`` task: problems and reference answers from a local JSONL file (Polaris-53K format).

Each line is a JSON object with a problem text and an answer (keys configurable). Invariants: the file is
read once, locally (never downloaded); a seeded shuffle assigns the last ``validation_size`` problems to the
validation split, so splits are disjoint and stable for a given (file, seed); problem ids are ``m<line>``
(1-based line numbers in the file), stable under reshuffling. Reward: ``answers_match`` (Math-Verify or SymPy
after stripping the thinking part).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from rl_core.tasks.base import Problem, Split, check_split
from rl_core.tasks.config import MathTaskConfig
from rl_core.tasks.math_check import answers_match

__all__ = ["MathTask", "load_math_jsonl"]


def load_math_jsonl(cfg: MathTaskConfig) -> list[Problem]:
    """Problems of the JSONL file in file order; errors name the file, the line and the missing key."""
    if not cfg.path.is_file():
        raise FileNotFoundError(f"task.path: math problem file {str(cfg.path)!r} does not exist")
    problems: list[Problem] = []
    with cfg.path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{cfg.path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{cfg.path}:{lineno}: expected a JSON object")
            for key in (cfg.problem_key, cfg.answer_key):
                if key not in row:
                    raise ValueError(f"{cfg.path}:{lineno}: missing key {key!r} (task.problem_key/answer_key)")
            prompt = cfg.template.replace("{problem}", str(row[cfg.problem_key]).strip())
            problems.append(Problem(id=f"m{lineno}", prompt=prompt, answer=str(row[cfg.answer_key]).strip()))
            if cfg.limit is not None and len(problems) >= cfg.limit:
                break
    return problems


class MathTask:
    """Math problems from a local JSONL file with a seeded train/validation split."""

    def __init__(self, cfg: MathTaskConfig) -> None:
        self.config = cfg
        self.name: str = "math"
        problems = load_math_jsonl(cfg)
        if len(problems) <= cfg.validation_size:
            raise ValueError(
                f"task.validation_size ({cfg.validation_size}) must be smaller than the number of problems "
                f"in {cfg.path} ({len(problems)})"
            )
        order = list(range(len(problems)))
        random.Random(cfg.seed).shuffle(order)
        cut = len(order) - cfg.validation_size
        self._splits: dict[Split, tuple[Problem, ...]] = {
            "train": tuple(problems[i] for i in order[:cut]),
            "validation": tuple(problems[i] for i in order[cut:]),
        }

    def problems(self, split: Split) -> Sequence[Problem]:
        """The fixed problem list of ``split``."""
        return self._splits[check_split(split)]

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 iff the final answer after the thinking part is equivalent to the reference."""
        return 1.0 if answers_match(problem.answer, completion) else 0.0
