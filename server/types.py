"""Constrained scalar types shared by request models: what both databases can store without error.

PostgreSQL text cannot hold NUL characters and its integers are 64-bit: such input is a 422, never a 500.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, Strict

from rl_core.contracts.points import MAX_COMPUTE, METRIC_NAME_MAX

MAX_ID = 2**63 - 1


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\x00) characters")
    return value


# Numbers are strict (docs/api.md): a JSON number of the right kind, never a string or a boolean; an integer is
# a valid float.
Text = Annotated[str, AfterValidator(_no_nul)]
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+=@/ -]*$")]
MetricName = Annotated[str, Field(min_length=1, max_length=METRIC_NAME_MAX), AfterValidator(_no_nul)]
DbId = Annotated[int, Strict(), Field(ge=1, le=MAX_ID)]
Seed = Annotated[int, Strict(), Field(ge=0, le=2**31 - 1)]
FiniteFloat = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Compute = Annotated[float, Strict(), Field(ge=0.0, le=MAX_COMPUTE, allow_inf_nan=False)]
Budget = Annotated[float, Strict(), Field(gt=0.0, le=MAX_COMPUTE, allow_inf_nan=False)]
