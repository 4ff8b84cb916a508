"""The prompt sampler: epochs over the training problems in a seeded order, with No-Positive-Resampling.

At the start of each epoch the order is drawn by the curriculum (``NoPositiveResampling.epoch_order``), which
leaves out retired prompts; ``next_batch(P)`` hands out the next P ids, rolling into the next epoch when the
current one runs out. The epoch's order is part of the state, so a restored sampler continues exactly where it
was even though the curriculum kept changing during the epoch.

Invariants: within an epoch every active prompt is handed out once; ``state_dict``/``load_state_dict`` round-trip
(JSON-serialisable) and a restored sampler yields the same future batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl_core.algorithms.curriculum import NoPositiveResampling


class PromptsExhausted(RuntimeError):
    """No prompt is left to hand out: No-Positive-Resampling retired every training prompt (the task is learned)."""


class PromptSampler:
    def __init__(self, problem_ids: Sequence[str], curriculum: NoPositiveResampling, *, seed: int = 0) -> None:
        if not problem_ids:
            raise ValueError("the training split has no problems")
        self.ids = list(problem_ids)
        self.curriculum = curriculum
        self.seed = seed
        self.epoch = -1
        self.order: list[str] = []
        self.cursor = 0

    def _next_epoch(self) -> None:
        self.epoch += 1
        self.order = self.curriculum.epoch_order(self.ids, self.epoch, self.seed)
        self.cursor = 0

    def next_batch(self, n: int) -> list[str]:
        """The next ``n`` prompt ids (crossing into new epochs as needed); ``PromptsExhausted`` when every prompt is
        retired."""
        out: list[str] = []
        empty_epochs = 0
        while len(out) < n:
            if self.cursor >= len(self.order):
                self._next_epoch()
                if not self.order:
                    empty_epochs += 1
                    if empty_epochs > 1:
                        raise PromptsExhausted("every training prompt was retired by No-Positive-Resampling")
                    continue
            out.append(self.order[self.cursor])
            self.cursor += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "order": list(self.order), "cursor": self.cursor, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = int(state["epoch"])
        self.order = [str(x) for x in state["order"]]
        self.cursor = int(state["cursor"])
        self.seed = int(state["seed"])
