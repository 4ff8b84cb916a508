"""Parsing untrusted request bodies without letting them exhaust the server, and quoting them without echoing them.

Invariants: YAML aliases are refused (a few hundred bytes of anchors can expand to gigabytes: "billion laughs";
the YAML parser is :mod:`server.base.yamlsafe`); JSON and YAML nest at most :data:`MAX_DEPTH` levels; an error message
never carries more than :data:`CLIP` characters of one piece of client input; :func:`unstorable` finds every value
that neither database nor a JSON answer can hold (NaN/Infinity, lone surrogates), so free-form parts of a body
(recipes, grids, a prior's extras) are refused with a 422 instead of failing at insert or poisoning every later
read of the row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from server.base.types import has_surrogate

#: Deepest nesting of objects/arrays a request body may have (a grid document needs fewer than 10).
MAX_DEPTH = 32
#: At most this many characters of one piece of client input are quoted back in an error.
CLIP = 100
#: An error lists at most this many problems, each at most this long.
MAX_PROBLEMS = 50
MAX_PROBLEM_CHARS = 300


class UnsafeInput(ValueError):
    """The body is refused before it is interpreted (HTTP 422)."""


def clip(value: Any, limit: int = CLIP) -> str:
    """``value`` as short text: strings as they are, anything else as compact JSON (or repr), cut to ``limit``.
    Lone surrogates are written as ``\\udXXX`` escapes, so the text can always be answered as JSON."""
    if isinstance(value, str):
        text = value.encode("utf-8", "backslashreplace").decode("utf-8") if has_surrogate(value) else value
    else:
        try:
            text = json.dumps(value, separators=(",", ":"), default=repr)
        except (ValueError, RecursionError):
            text = type(value).__name__
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def clip_problems(problems: list[str]) -> list[str]:
    """A bounded list of bounded problem lines (the messages of rl_core and pydantic may quote the input)."""
    out = [p if len(p) <= MAX_PROBLEM_CHARS else p[:MAX_PROBLEM_CHARS] + "…" for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        out.append(f"... and {len(problems) - MAX_PROBLEMS} more problems")
    return out


def check_depth(data: Any, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`UnsafeInput` when ``data`` nests deeper than ``max_depth`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise UnsafeInput(f"the body nests too deep: more than {max_depth} levels of objects/arrays")
        stack.extend((child, depth + 1) for child in children)


_SURROGATE = "not a lone surrogate escape such as \\ud800"


def unstorable(data: Any, where: str = "") -> list[str]:
    """'key: problem' for every non-finite number and every string or key with a lone surrogate in ``data``
    (iterative: no recursion); ``where`` prefixes the dotted keys. Empty when ``data`` can be stored and answered."""
    problems: list[str] = []
    stack: list[tuple[Any, str]] = [(data, where)]
    while stack and len(problems) < MAX_PROBLEMS:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{path or 'body'}: must be a finite number, not {item} (NaN and Infinity are not allowed)")
        elif isinstance(item, str) and has_surrogate(item):
            problems.append(f"{path or 'body'}: must be valid Unicode text, {_SURROGATE}")
        elif isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and has_surrogate(key):
                    problems.append(f"{path or 'body'}: keys must be valid Unicode text, {_SURROGATE}")
                    continue
                stack.append((value, f"{path}.{clip(key, 60)}" if path else clip(key, 60)))
        elif isinstance(item, (list, tuple)):
            stack.extend((value, f"{path}.{i}" if path else str(i)) for i, value in enumerate(item))
    return sorted(problems)


def loads_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that answers a ValueError (never RecursionError) and refuses deep nesting."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise UnsafeInput(f"the body nests too deep: more than {max_depth} levels of objects/arrays") from None
    check_depth(data, max_depth)
    return data


#: Longest string (characters) and longest list (items) anywhere in a free-form document (grid documents: recipes,
#: axes, priors). An axis never needs more values than a grid has runs (4,096).
MAX_STRING_CHARS = 16_000
MAX_LIST_ITEMS = 4096


def check_sizes(data: Any, max_chars: int = MAX_STRING_CHARS, max_items: int = MAX_LIST_ITEMS) -> None:
    """Raise :class:`UnsafeInput` naming the first string (value or key) longer than ``max_chars`` or list longer
    than ``max_items`` in ``data`` (iterative; call it before validating or expanding a document)."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if len(item) > max_chars:
                raise UnsafeInput(f"{path or 'body'}: strings are at most {max_chars} characters, got {len(item)}")
        elif isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and len(key) > max_chars:
                    raise UnsafeInput(f"{path or 'body'}: keys are at most {max_chars} characters, got {len(key)}")
                stack.append((value, f"{path}.{clip(key, 60)}" if path else clip(key, 60)))
        elif isinstance(item, list):
            if len(item) > max_items:
                raise UnsafeInput(f"{path or 'body'}: lists have at most {max_items} items, got {len(item)}")
            stack.extend((value, f"{path}.{i}" if path else str(i)) for i, value in enumerate(item))


def clip_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Pydantic/FastAPI validation errors with the echoed ``input`` and location parts clipped."""
    out: list[dict[str, Any]] = []
    for err in list(errors)[:MAX_PROBLEMS]:
        item = dict(err)
        if "input" in item:
            item["input"] = clip(item["input"])
        if "loc" in item:
            item["loc"] = [p if isinstance(p, int) else clip(p, 60) for p in item["loc"]]
        if isinstance(item.get("msg"), str):
            item["msg"] = clip(item["msg"], MAX_PROBLEM_CHARS)
        if not _small(item.get("ctx")):
            item.pop("ctx", None)
        out.append(item)
    return out


def _small(value: Any) -> bool:
    return value is None or len(clip(value, 400)) <= 400
