"""Everything a request needs, built once per app: settings, engine, sessions, notifier, refitter, fit cache."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.background import ExperimentRefit, IntervalRefitter
from server.db import make_engine, session_factory
from server.events import Notifier
from server.fitpool import FitPool
from server.recommending import FitCache
from server.settings import Settings


@dataclass
class ServiceContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    notifier: Notifier = field(default_factory=Notifier)
    cache: FitCache = field(default_factory=FitCache)
    refitter: IntervalRefitter | None = None
    pool: FitPool = field(default_factory=lambda: FitPool(0))

    def close(self) -> None:
        """Stop background work and release the database (the app's lifespan calls this at shutdown)."""
        if self.refitter is not None:
            self.refitter.stop()
        self.pool.shutdown()

    @classmethod
    def build(cls, settings: Settings) -> ServiceContext:
        engine = make_engine(settings.database_url)
        ctx = cls(
            settings=settings, engine=engine, sessions=session_factory(engine), pool=FitPool(settings.fit_workers)
        )
        ctx.cache = FitCache(ctx.pool)
        if settings.interval_refit:
            ctx.refitter = IntervalRefitter(
                ExperimentRefit(ctx.engine, ctx.sessions, ctx.cache, settings.forecast_factors),
                settings.interval_refit_min_seconds,
                ctx.notifier.notify,
            )
        return ctx

    def refit_soon(self, experiment_id: int) -> None:
        """Queue the interval refits and recommendations of an experiment off the request path."""
        if self.refitter is not None:
            self.refitter.submit(experiment_id)
