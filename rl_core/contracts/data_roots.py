"""Local paths named by a run (a model directory, a task file) are opened only under allowed roots.

The service checks a run's paths when it is submitted and the worker checks them again before it opens anything
(``allowed_data_roots`` in both settings); neither says whether a refused path exists. Both decide what names a path
with :func:`names_path`, the one rule: an explicit local path (absolute, ``~``, ``./`` or ``../``, a ``..`` part, a
backslash). Anything else is a name: a preset (``tiny``) or a Hugging Face hub id (``Qwen/Qwen2.5-0.5B-Instruct``;
``etc/passwd`` is one too, and is never opened as a file).
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def outside_roots(path: str, roots: Sequence[str]) -> bool:
    """True unless ``path`` (resolved: no ``..``, symlinks followed) lies under one of ``roots``."""
    real = os.path.realpath(os.path.expanduser(path))
    for root in roots:
        base = os.path.realpath(os.path.expanduser(root))
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return False
    return True


def names_path(text: str) -> bool:
    """True when ``text`` names a local path (the rule of this module's docstring); a hub id ``Org/Name`` does not."""
    t = text.strip()
    return t.startswith(("/", "~", "./", "../")) or t in (".", "..") or "\\" in t or ".." in t.split("/")


def is_hub_id(text: str) -> bool:
    """True for a Hugging Face hub id (``Org/Name``): a name with a ``/`` that :func:`names_path` calls no path."""
    t = text.strip()
    return "/" in t and not t.startswith("{") and not names_path(t)
