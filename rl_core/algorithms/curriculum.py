"""No-Positive-Resampling: prompts whose pass rate reaches a threshold leave all later epochs.

The curriculum keeps, per prompt id, the pass counts it has seen. ``history="last"`` judges a prompt by
its most recent group of generations; ``"cumulative"`` by all of them. Once judged at or above the threshold
a prompt is retired for good (it is never re-admitted, whatever later statistics say). The sampler asks
``active`` (or ``epoch_order``) for the prompts of the next epoch.

Invariants: ``state_dict()`` is JSON-serialisable; ``load_state_dict(state_dict())`` restores an identical
curriculum; ``epoch_order`` is a pure function of (prompt ids, epoch, seed, retired set).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rl_core.recipe.model import CurriculumConfig

PassRateHistory = Literal["last", "cumulative"]
_STATE_VERSION = 1


@dataclass
class PromptRecord:
    """Pass counts of one prompt: totals over its history and the latest group."""

    passed: int = 0
    total: int = 0
    last_passed: int = 0
    last_total: int = 0


class NoPositiveResampling:
    """Per-prompt pass-rate history and the set of retired prompts (see module doc)."""

    def __init__(self, threshold: float = 0.9, *, history: PassRateHistory = "last", enabled: bool = True) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if history not in ("last", "cumulative"):
            raise ValueError(f"history must be 'last' or 'cumulative', got {history!r}")
        self.threshold = threshold
        self.history: PassRateHistory = history
        self.enabled = enabled
        self._records: dict[str, PromptRecord] = {}
        self._retired: set[str] = set()

    @classmethod
    def from_config(cls, cfg: CurriculumConfig) -> NoPositiveResampling:
        """The curriculum a recipe's ``curriculum`` section asks for (disabled when NPR is off)."""
        return cls(cfg.pass_rate_threshold, history=cfg.history, enabled=cfg.no_positive_resampling)

    def update(self, prompt_id: str, n_passed: int, n_total: int) -> bool:
        """Record a group of ``n_total`` generations of which ``n_passed`` passed; True if now retired."""
        if n_total <= 0 or not 0 <= n_passed <= n_total:
            raise ValueError(f"need 0 <= n_passed <= n_total and n_total > 0, got {n_passed}/{n_total}")
        rec = self._records.setdefault(prompt_id, PromptRecord())
        rec.passed += n_passed
        rec.total += n_total
        rec.last_passed, rec.last_total = n_passed, n_total
        rate = self.pass_rate(prompt_id)
        if self.enabled and rate is not None and rate >= self.threshold:
            self._retired.add(prompt_id)
        return prompt_id in self._retired

    def pass_rate(self, prompt_id: str) -> float | None:
        """The pass rate the curriculum judges by (per ``history``), or None if never seen."""
        rec = self._records.get(prompt_id)
        if rec is None:
            return None
        if self.history == "last":
            return rec.last_passed / rec.last_total
        return rec.passed / rec.total

    def is_retired(self, prompt_id: str) -> bool:
        """True once the prompt has reached the threshold (never when disabled)."""
        return prompt_id in self._retired

    @property
    def retired(self) -> frozenset[str]:
        """Every retired prompt id."""
        return frozenset(self._retired)

    def active(self, prompt_ids: Iterable[str]) -> list[str]:
        """``prompt_ids`` without the retired ones, order preserved."""
        return [p for p in prompt_ids if p not in self._retired]

    def epoch_order(self, prompt_ids: Iterable[str], epoch: int, seed: int = 0) -> list[str]:
        """Active prompts of ``epoch`` in a deterministic shuffled order (seeded by ``seed``, ``epoch``)."""
        order = self.active(prompt_ids)
        random.Random(f"{seed}:{epoch}").shuffle(order)
        return order

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state to store with a checkpoint."""
        return {
            "version": _STATE_VERSION,
            "threshold": self.threshold,
            "history": self.history,
            "enabled": self.enabled,
            "records": {
                pid: [r.passed, r.total, r.last_passed, r.last_total] for pid, r in sorted(self._records.items())
            },
            "retired": sorted(self._retired),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a ``state_dict``; the stored settings replace the current ones."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported curriculum state version {state.get('version')!r}")
        self.threshold = float(state["threshold"])
        history = state["history"]
        if history not in ("last", "cumulative"):
            raise ValueError(f"bad history {history!r} in curriculum state")
        self.history = history
        self.enabled = bool(state["enabled"])
        self._records = {str(pid): PromptRecord(*map(int, v)) for pid, v in state["records"].items()}
        self._retired = {str(p) for p in state["retired"]}
