"""Run a coroutine to completion from a synchronous test, whatever loop the test's thread already runs.

Playwright's sync API (the browser tests) keeps an event loop running in the main thread of the xdist worker that
ran them, and ``asyncio.run`` refuses to start inside a running loop: a test that ran after them in that worker
failed with "asyncio.run() cannot be called from a running event loop". Each coroutine here gets a thread of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-asyncio") as pool:
        return pool.submit(asyncio.run, coro).result()
