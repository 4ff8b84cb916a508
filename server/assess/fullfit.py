"""A run's full fit (with posterior draws) computed off the request path, into the shared :class:`FitCache`.

Invariant: reads never fit. ``GET /runs/{id}/reach`` answers from the cached full fit of the run's current points
(the one the assessment and decisions use) and, on a miss, queues the run here and answers ``fit_pending``; the
refitter coalesces a run asked for many times into one fit, read in autocommit with no transaction held.
"""

from __future__ import annotations

from sqlalchemy import Engine

from server.assess.fitcache import FitCache
from server.lifecycle.spec import run_with_spec
from server.store.db import read_session


class FullFit:
    def __init__(self, engine: Engine, cache: FitCache) -> None:
        self.engine = engine
        self.cache = cache

    def __call__(self, run_id: int) -> None:
        with read_session(self.engine) as reader:
            found = run_with_spec(reader, run_id)
            if found is not None:
                self.cache.get(reader, *found)
