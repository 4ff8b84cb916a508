"""Typed errors for recipes and grids, each carrying the dotted keys at fault and what is allowed there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One invalid key: ``key`` is dotted (``loss.type``); ``allowed`` lists valid keys or values."""

    key: str
    message: str
    allowed: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.key or '<recipe>'}: {self.message}"
        if self.allowed:
            text += f" (allowed: {', '.join(self.allowed)})"
        return text


class RecipeError(ValueError):
    """A recipe, a preset name or an override is invalid. ``problems`` holds one entry per bad key."""

    def __init__(self, problems: Sequence[Problem], *, context: str = "invalid recipe") -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        lines = [f"{context}:"] + [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))

    @property
    def keys(self) -> tuple[str, ...]:
        """The dotted keys at fault, in order."""
        return tuple(p.key for p in self.problems)


class GridError(RecipeError):
    """A grid specification is invalid (bad axis key, bad value, empty axis, bad seeds)."""

    def __init__(self, problems: Sequence[Problem], *, context: str = "invalid grid") -> None:
        super().__init__(problems, context=context)


class GridTooLargeError(GridError):
    """The grid asks for more runs than the cap allows; raised before any recipe is built."""

    def __init__(self, requested: int, max_runs: int) -> None:
        self.requested = requested
        self.max_runs = max_runs
        super().__init__(
            [Problem("axes", f"grid requests {requested} runs, more than the cap of {max_runs}")],
            context="grid too large",
        )
