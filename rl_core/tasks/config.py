"""Task configs: pydantic models that forbid unknown keys; ``kind`` picks the task.

``TaskConfig`` is a discriminated union on ``kind`` (``synthetic-addition``, ``synthetic-sort``,
``synthetic-modular``, ``math``); ``parse_task_config(mapping)`` validates one and errors name the bad key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

__all__ = [
    "AdditionTaskConfig",
    "MathTaskConfig",
    "ModularTaskConfig",
    "SortTaskConfig",
    "SyntheticTaskConfig",
    "TaskConfig",
    "parse_task_config",
]

DEFAULT_MATH_TEMPLATE = "{problem}\nLet's think step by step and output the final answer within \\boxed{}."


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _SyntheticConfig(_Config):
    """Shared knobs: ``seed`` fixes every problem; split sizes; whether demonstrations show a scratchpad."""

    seed: int = 0
    train_size: int = Field(default=2000, ge=1)
    validation_size: int = Field(default=200, ge=1)
    scratchpad: bool = True

    #: The (low, high) fields of each range the task draws from; a low above its high is refused.
    _ranges: ClassVar[tuple[tuple[str, str], ...]] = ()

    @model_validator(mode="after")
    def _ordered_ranges(self) -> _SyntheticConfig:
        for lo_key, hi_key in self._ranges:
            lo, hi = getattr(self, lo_key), getattr(self, hi_key)
            if lo > hi:
                raise ValueError(f"{lo_key} ({lo}) must be <= {hi_key} ({hi})")
        return self


class AdditionTaskConfig(_SyntheticConfig):
    """Add ``operands`` numbers of ``digits_min..digits_max`` digits each."""

    kind: Literal["synthetic-addition"] = "synthetic-addition"
    digits_min: int = Field(default=1, ge=1, le=18)
    digits_max: int = Field(default=3, ge=1, le=18)
    operands: int = Field(default=2, ge=2, le=6)
    _ranges = (("digits_min", "digits_max"),)


class SortTaskConfig(_SyntheticConfig):
    """Sort ``length_min..length_max`` symbols drawn from the first ``alphabet`` digits."""

    kind: Literal["synthetic-sort"] = "synthetic-sort"
    length_min: int = Field(default=3, ge=1, le=64)
    length_max: int = Field(default=8, ge=1, le=64)
    alphabet: int = Field(default=10, ge=2, le=10)
    _ranges = (("length_min", "length_max"),)


class ModularTaskConfig(_SyntheticConfig):
    """Sum ``terms_min..terms_max`` residues modulo ``modulus``."""

    kind: Literal["synthetic-modular"] = "synthetic-modular"
    modulus: int = Field(default=7, ge=2, le=997)
    terms_min: int = Field(default=2, ge=1, le=64)
    terms_max: int = Field(default=5, ge=1, le=64)
    _ranges = (("terms_min", "terms_max"),)


class MathTaskConfig(_Config):
    """Math word problems from a local JSONL file (Polaris-53K format: one ``{"problem", "answer"}`` per line).

    The last ``validation_size`` problems of a seeded shuffle are the validation split (0 = no shuffle and an
    empty validation split is not allowed). ``template`` wraps each problem; ``{problem}`` is replaced.
    """

    kind: Literal["math"] = "math"
    path: Path
    seed: int = 0
    validation_size: int = Field(default=64, ge=1)
    limit: int | None = Field(default=None, ge=2)
    problem_key: str = "problem"
    answer_key: str = "answer"
    template: str = DEFAULT_MATH_TEMPLATE

    @model_validator(mode="after")
    def _template(self) -> MathTaskConfig:
        if "{problem}" not in self.template:
            raise ValueError("template must contain '{problem}'")
        return self


SyntheticTaskConfig = AdditionTaskConfig | SortTaskConfig | ModularTaskConfig
TaskConfig = Annotated[
    AdditionTaskConfig | SortTaskConfig | ModularTaskConfig | MathTaskConfig, Field(discriminator="kind")
]
_ADAPTER: TypeAdapter[TaskConfig] = TypeAdapter(TaskConfig, config=ConfigDict(title="task"))


def parse_task_config(data: Mapping[str, Any] | TaskConfig) -> TaskConfig:
    """Validate a task config mapping (pydantic ``ValidationError`` naming the bad key on failure)."""
    if isinstance(data, BaseModel):
        return data
    return _ADAPTER.validate_python(dict(data))
