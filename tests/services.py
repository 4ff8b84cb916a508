"""The rule for tests that need a real service (PostgreSQL, Redis, a browser): they run for real in CI, where a
missing service is a failure; on a developer's machine they are skipped with the reason."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Fail under CI (the CI variable is set), skip otherwise."""
    if os.environ.get("CI"):
        pytest.fail(f"this test must run in CI: {reason}")
    pytest.skip(reason)
