"""Everything a request needs, built once per app: settings, engine, sessions, notifier, refitters, pools and every
in-process cache (fits, parsed assessments, chart curves): no module of the service keeps state of its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.assess.assessing import ParsedAssessments
from server.assess.background import ExperimentRefit, IntervalRefitter, PointRefit
from server.assess.charts.chart import CurveCache
from server.assess.fitpool import FitPool
from server.assess.fullfit import FullFit
from server.assess.jobs import JobRunner
from server.assess.recommending import FitCache
from server.http.parsepool import ParsePool
from server.lifecycle.token_cache import TokenCache
from server.runtime.streams.hub import StreamHub
from server.store.db import make_engine, session_factory
from server.store.events import Notifier
from server.store.settings import Settings


@dataclass
class ServiceContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    notifier: Notifier = field(default_factory=Notifier)
    cache: FitCache = field(default_factory=FitCache)
    refitter: IntervalRefitter | None = None
    #: Runs' point fits, off the request path (always on: a run's point fit is its forecast).
    point_refitter: IntervalRefitter | None = None
    pool: FitPool = field(default_factory=lambda: FitPool(0))
    #: Runs' full fits that a read asked for and the cache did not hold (``/reach``), off the request path.
    full_refitter: IntervalRefitter | None = None
    #: YAML and large JSON bodies are parsed here, bounded (never in the shared worker-thread pool).
    parser: ParsePool = field(default_factory=ParsePool)
    #: Stored assessments, parsed once per version (every read of a page, the verdict, the run detail).
    parsed: ParsedAssessments = field(default_factory=ParsedAssessments)
    #: Runs' stored curves for charts, by their count of evaluations.
    curves: CurveCache = field(default_factory=CurveCache)
    #: API tokens as requests present them (admission and routes share one lookup).
    tokens: TokenCache = field(init=False)
    #: Jobs a request started (an experiment's recommendations), run off the request path (set by :meth:`build`).
    jobs: JobRunner = field(init=False)
    #: Every open event stream: the cap per token, revocation, one change feed per experiment.
    streams: StreamHub = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = TokenCache(self.engine)
        self.streams = StreamHub(self.engine, self.notifier, self.settings)

    def start(self) -> None:
        """Start the background refitters and the job runner (the app's lifespan calls this at start)."""
        for refitter in (self.point_refitter, self.refitter, self.full_refitter):
            if refitter is not None:
                refitter.start()
        self.jobs.start()

    def close(self) -> None:
        """Stop background work and release the database (the app's lifespan calls this at shutdown)."""
        for refitter in (self.point_refitter, self.refitter, self.full_refitter):
            if refitter is not None:
                refitter.stop()
        self.jobs.stop()
        self.pool.shutdown()
        self.parser.shutdown()
        self.tokens.shutdown()

    @classmethod
    def build(cls, settings: Settings) -> ServiceContext:
        engine = make_engine(settings.database_url)
        ctx = cls(
            settings=settings,
            engine=engine,
            sessions=session_factory(engine),
            pool=FitPool(settings.fit_workers),
            parser=ParsePool(settings.parse_workers, settings.parse_queue),
        )
        ctx.cache = FitCache(ctx.pool)
        ctx.jobs = JobRunner(ctx.engine, ctx.sessions, ctx.cache, ctx.notifier.notify)
        if settings.interval_refit:
            ctx.refitter = IntervalRefitter(
                # An experiment's job and its background assessment take turns and share their last result.
                ExperimentRefit(
                    ctx.engine, ctx.sessions, ctx.cache, settings.forecast_factors, assess=ctx.jobs.turns.assess
                ),
                settings.interval_refit_min_seconds,
                ctx.notifier.notify,
            )
        ctx.point_refitter = IntervalRefitter(
            PointRefit(ctx.engine, ctx.sessions, ctx.pool, settings.forecast_factors, after=ctx.refit_soon),
            settings.point_refit_seconds,
            ctx.notifier.notify,
            name="point refit of run",
        )
        ctx.full_refitter = IntervalRefitter(FullFit(ctx.engine, ctx.cache), 0.0, name="full fit of run")
        return ctx

    def fit_run_soon(self, run_id: int) -> None:
        """Queue a run's full fit into the fit cache (a read found none for its current points)."""
        if self.full_refitter is not None:
            self.full_refitter.submit(run_id)

    def refit_soon(self, experiment_id: int) -> None:
        """Queue the interval refits and recommendations of an experiment off the request path."""
        if self.refitter is not None:
            self.refitter.submit(experiment_id)

    def refit_run_soon(self, run_id: int) -> None:
        """Queue the point fit of a run whose stored evaluations are newer than its fit (coalesced per run: at most
        one refit every ``point_refit_seconds``, however many batches arrived meanwhile)."""
        if self.point_refitter is not None:
            self.point_refitter.submit(run_id)

    def refitters(self) -> dict[str, IntervalRefitter]:
        """The background fitters by name (``/readyz`` reports their lag)."""
        named = {"point": self.point_refitter, "assessment": self.refitter, "full": self.full_refitter}
        return {name: r for name, r in named.items() if r is not None}

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until the queued point fits, then the queued jobs and assessments, are done; False on timeout (tests,
        benchmarks)."""
        for refitter in (self.point_refitter, self.jobs.queue, self.refitter, self.full_refitter):
            if refitter is not None and not refitter.drain(timeout):
                return False
        return True
