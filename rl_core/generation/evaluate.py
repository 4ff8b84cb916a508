"""mean@k pass rate on held-out prompts: batched generation and the task's reward."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rl_core.contracts.records import as_metrics
from rl_core.generation.generator import Generator
from rl_core.tasks.base import Split, Task

__all__ = ["EvalResult", "evaluate"]


@dataclass(frozen=True)
class EvalResult:
    """``pass_rate`` = mean over prompts of the fraction of its k samples that are correct (mean@k).

    ``tokens`` counts generated response tokens, ``seconds`` the wall time of generation and scoring,
    ``truncation_rate`` the share of samples that ran out of tokens.
    """

    pass_rate: float
    n_prompts: int
    k: int
    tokens: int
    seconds: float
    truncation_rate: float = 0.0

    def metrics(self) -> dict[str, float]:
        """Every field as ``eval/<field>`` (``n_prompts`` as ``eval/prompts``)."""
        return as_metrics(self, "eval/", {"n_prompts": "prompts"})


def evaluate(
    generator: Generator,
    task: Task,
    *,
    split: Split = "validation",
    k: int = 1,
    limit: int | None = None,
    batch_prompts: int = 64,
) -> EvalResult:
    """Generate k samples for each of the first ``limit`` problems of ``split`` and score them.

    Uses the generator's current weights and sampling settings; no weight updates happen during evaluation.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    problems = list(task.problems(split))[: limit if limit is not None else None]
    started = time.perf_counter()
    correct = tokens = truncated = 0.0
    for lo in range(0, len(problems), batch_prompts):
        part = problems[lo : lo + batch_prompts]
        for rollout in generator.generate(part, k):
            correct += task.reward(part[rollout.prompt_index], rollout.text)
            tokens += len(rollout.response_ids)
            truncated += rollout.truncated
    n = len(problems) * k
    return EvalResult(
        pass_rate=correct / n if n else 0.0,
        n_prompts=len(problems),
        k=k,
        tokens=int(tokens),
        seconds=time.perf_counter() - started,
        truncation_rate=truncated / n if n else 0.0,
    )
