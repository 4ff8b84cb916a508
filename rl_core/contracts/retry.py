"""How a client of the REST API waits before it tries again: the ``Retry-After`` header and the back-off rule.

- :func:`retry_after`: the seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date; the service
  sends delta-seconds with its JSON 503s while its database restarts or it sheds load).
- :func:`backoff_delay`: the one back-off rule: ``base · 2^(failures-1)`` seconds, capped at ``cap``; a
  ``Retry-After`` lengthens the wait, within the same cap.

Torch-free and server-free: ``scalerl.client`` (used by the CLI, the worker and the Reporter) and the engine's
``HttpReporter`` import this module.
"""

from __future__ import annotations

import math
import time
from email.utils import parsedate_to_datetime


def retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date; a past date or a negative number is 0);
    None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def backoff_delay(failures: int, base: float, cap: float, hint: float | None = None) -> float:
    """Seconds to wait after the ``failures``-th failure in a row (1 for the first): ``base · 2^(failures-1)``
    capped at ``cap``; at least ``hint`` (the service's ``Retry-After``) when given, also capped at ``cap``."""
    delay: float = min(cap, base * 2.0 ** max(0, failures - 1))
    if hint is not None:
        delay = max(delay, min(cap, hint))
    return delay
