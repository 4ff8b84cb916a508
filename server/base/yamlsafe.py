"""YAML request bodies, parsed once, with every limit enforced while the document is built.

libyaml's event stream (PyYAML's own parser without it) is read event by event and the Python objects are built
from it directly, with no node tree: a document is refused at its first alias, merge key, unknown tag, nesting past
:data:`~server.base.safeinput.MAX_DEPTH`, string or key past ``max_chars`` or list past ``max_items``, so the work and
memory spent on a refused document stop where it broke a limit, not after it was built whole.

Invariants: the result equals ``yaml.safe_load`` (YAML 1.2 floats such as ``1e4`` included) on every accepted
document; scalars are built by SafeLoader's own resolvers and constructors, so no tag outside
:data:`SCALAR_TAGS` yields an object; CPU-bound, so call it from the parse pool (:mod:`server.http.parsepool`).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from server.base.safeinput import MAX_DEPTH, MAX_LIST_ITEMS, MAX_STRING_CHARS, UnsafeInput, clip

#: Largest YAML document accepted (bytes); larger ones are refused before parsing (send JSON instead).
MAX_YAML_BYTES = 256 * 1024

_T = "tag:yaml.org,2002:"
#: The scalar tags a document may carry (implicitly or written out); anything else is refused.
SCALAR_TAGS = frozenset(_T + t for t in ("null", "bool", "int", "float", "str", "binary", "timestamp"))
_SEQ, _MAP = _T + "seq", _T + "map"

# YAML 1.2 numbers that YAML 1.1 (PyYAML) reads as strings: 1e4, 5e-7 (no dot). Strict types would refuse them.
_FLOAT_12 = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class _PyLoader(yaml.SafeLoader):
    """PyYAML's pure-Python parser, with the YAML 1.2 float resolver."""


_PyLoader.add_implicit_resolver(_T + "float", _FLOAT_12, list("-+0123456789"))
_Loader: Any = _PyLoader
if getattr(yaml, "__with_libyaml__", False):

    class _CLoader(yaml.CSafeLoader):
        """libyaml's parser (C) with the same resolvers."""

    _CLoader.add_implicit_resolver(_T + "float", _FLOAT_12, list("-+0123456789"))
    _Loader = _CLoader


def load_yaml(
    text: str,
    max_bytes: int = MAX_YAML_BYTES,
    max_items: int = MAX_LIST_ITEMS,
    max_chars: int = MAX_STRING_CHARS,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """One YAML document as Python objects, or :class:`UnsafeInput` naming the first limit it broke (a malformed one:
    ``yaml.YAMLError``)."""
    size = len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > max_bytes else len(text)
    if size > max_bytes:
        raise UnsafeInput(f"YAML documents are at most {max_bytes} bytes, got {size}; send large documents as JSON")
    loader = _Loader(text)
    try:
        return _Builder(loader, max_items, max_chars, max_depth).document()
    except yaml.YAMLError as exc:
        if "nesting depth" in str(exc):  # libyaml's own limit (1,000 levels), met while scanning ahead
            raise UnsafeInput(f"the body nests too deep: more than {max_depth} levels of mappings/lists") from None
        raise
    finally:
        loader.dispose()


def _line(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return "?" if mark is None else str(mark.line + 1)


class _Builder:
    """Builds one document from ``loader``'s events; a stack of open lists and mappings (never recursion)."""

    def __init__(self, loader: Any, max_items: int, max_chars: int, max_depth: int) -> None:
        self.loader = loader
        self.max_items, self.max_chars, self.max_depth = max_items, max_chars, max_depth
        # Open containers: (the list or dict, its path, the key awaiting its value or _NO_KEY).
        self.stack: list[list[Any]] = []

    def document(self) -> Any:
        get = self.loader.get_event
        get()  # StreamStart
        if self.loader.check_event(yaml.StreamEndEvent):
            return None
        get()  # DocumentStart
        result: list[Any] = []
        while not self.loader.check_event(yaml.DocumentEndEvent):
            event = get()
            value = self._event(event)
            if value is not _OPEN and not self.stack:
                result.append(value)
        get()  # DocumentEnd
        if not self.loader.check_event(yaml.StreamEndEvent):
            raise UnsafeInput("a request body holds one YAML document, not several (found a second '---')")
        return result[0] if result else None

    def _event(self, event: Any) -> Any:
        if isinstance(event, yaml.ScalarEvent):
            return self._add(self._scalar(event))
        if isinstance(event, yaml.AliasEvent):
            raise UnsafeInput(
                f"YAML aliases are not allowed in request bodies (found *{clip(event.anchor, 40)} at line "
                f"{_line(event)}); write the values out"
            )
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            seq = isinstance(event, yaml.SequenceStartEvent)
            if event.tag not in (None, "!", _SEQ if seq else _MAP):
                raise UnsafeInput(f"YAML tag {clip(event.tag, 60)} is not allowed (line {_line(event)})")
            if len(self.stack) >= self.max_depth:
                raise UnsafeInput(f"the body nests too deep: more than {self.max_depth} levels of mappings/lists")
            self.stack.append([[] if seq else {}, self._path(), _NO_KEY])
            return _OPEN
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            done = self.stack.pop()[0]
            return self._add(done) if self.stack else done
        raise UnsafeInput(f"unexpected YAML event {type(event).__name__} at line {_line(event)}")

    def _path(self) -> str:
        if not self.stack:
            return "body"
        container, path, key = self.stack[-1]
        here = str(len(container)) if isinstance(container, list) else clip(key, 60)
        return here if path == "body" else f"{path}.{here}"

    def _scalar(self, event: Any) -> Any:
        if len(event.value) > self.max_chars:
            where = "keys are" if self._awaits_key() else "strings are"
            raise UnsafeInput(f"{self._path()}: {where} at most {self.max_chars} characters, got {len(event.value)}")
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == _T + "merge":
            raise UnsafeInput(f"YAML merge keys (<<) are not allowed in request bodies (line {_line(event)})")
        if tag not in SCALAR_TAGS:
            raise UnsafeInput(f"YAML tag {clip(tag, 60)} is not allowed (line {_line(event)}); use plain values")
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        return self.loader.yaml_constructors[tag](self.loader, node)

    def _awaits_key(self) -> bool:
        return bool(self.stack) and isinstance(self.stack[-1][0], dict) and self.stack[-1][2] is _NO_KEY

    def _add(self, value: Any) -> Any:
        if not self.stack:
            return value
        top = self.stack[-1]
        container = top[0]
        if isinstance(container, list):
            if len(container) >= self.max_items:
                raise UnsafeInput(f"{top[1]}: lists have at most {self.max_items} items, got more")
            container.append(value)
        elif top[2] is _NO_KEY:
            if isinstance(value, (list, dict)):
                raise UnsafeInput(f"{top[1]}: mapping keys must be plain values, not lists or mappings")
            top[2] = value
        else:
            container[top[2]] = value
            top[2] = _NO_KEY
        return _OPEN


class _Marker:
    __slots__ = ()


_OPEN = _Marker()  # "nothing finished at the top level yet"
_NO_KEY = _Marker()  # "the open mapping awaits a key"
