"""``KEY=VALUE`` options (``--policy``, ``--config``): one parser, one error message naming the option and an
example."""

from __future__ import annotations

import json
from typing import Any

from scalerl.cli.errors import fail


def parse_key_values(items: tuple[str, ...], what: str, example: str) -> dict[str, tuple[Any, str]]:
    """Each ``KEY=VALUE`` as ``key -> (value read as JSON (numbers, true/false, null) else the text, the text)``; a
    malformed item is one error line: ``{what} 'x': write KEY=VALUE, e.g. {example}``."""
    out: dict[str, tuple[Any, str]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"{what} {item!r}: write KEY=VALUE, e.g. {example}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        out[key.strip()] = (value, raw)
    return out
