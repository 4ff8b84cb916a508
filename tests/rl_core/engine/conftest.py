"""The ``tiny`` run config as a fixture (tests/support/tiny.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.tiny_run import tiny_config


@pytest.fixture
def tiny() -> dict[str, Any]:
    return tiny_config()
