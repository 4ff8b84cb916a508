"""Constrained scalar types shared by request models: what both databases can store without error.

PostgreSQL text cannot hold NUL characters, no database (nor a JSON answer) can hold a lone UTF-16 surrogate (JSON
``"\\ud800"`` decodes to one), and PostgreSQL integers are 64-bit: such input is a 422, never a 500.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, Strict

from rl_core.contracts.points import MAX_COMPUTE, METRIC_NAME_MAX

MAX_ID = 2**63 - 1


def has_surrogate(value: str) -> bool:
    """True when ``value`` holds a lone surrogate (U+D800..U+DFFF): not encodable as UTF-8, so never storable."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _no_nul(value: str) -> str:
    """Text both databases can store: no NUL character and no lone surrogate."""
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\x00) characters")
    if has_surrogate(value):
        raise ValueError("must be valid Unicode text: a lone surrogate escape such as \\ud800 is not allowed")
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

#: A run's description: a flat config of scalars, short tags, free-text notes.
CONFIG_MAX = 200
NOTES_MAX = 10_000
ConfigKey = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_no_nul)]
#: A config value: a JSON boolean, number (finite) or short string, kept as sent (smart union: exact types win).
ConfigValue = (
    Annotated[bool, Strict()]
    | Annotated[int, Strict()]
    | Annotated[float, Strict(), Field(allow_inf_nan=False)]
    | Annotated[str, Field(max_length=500), AfterValidator(_no_nul)]
)
RunConfig = Annotated[dict[ConfigKey, ConfigValue], Field(max_length=CONFIG_MAX)]
RunTags = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+=@/ -]*$")]],
    Field(max_length=50),
]
