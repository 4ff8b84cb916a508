"""Local paths named by a run (a model directory, a task file) are opened only under allowed roots.

The service checks a run's paths when it is submitted and the worker checks them again before it opens anything
(``allowed_data_roots`` in both settings); neither says whether a refused path exists.
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
