"""ORM tables. The Alembic migrations in ``server/store/migrations/versions`` create exactly these (one schema, both
databases).

Invariants: a metric point is identified by (run_id, step) and is never overwritten; fit and recommendation
snapshots and assessment moments are append-only history; every run status change has a row in
``run_transitions``; events have a monotonically increasing id that SSE clients resume from; at most one job of a
kind per experiment is queued or running.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Integer primary keys that autoincrement on SQLite (INTEGER) and Postgres (BIGINT identity).
BigId = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Experiment(Base):
    __tablename__ = "experiments"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: The full recipe its grid's runs share, stored once (``server.lifecycle.recipes``); NULL for experiments without
    #: one.
    base_recipe: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    policy_mode: Mapped[str] = mapped_column(String(20), default="recommend")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("experiment_id", "name", name="uq_runs_experiment_name"),
        Index("ix_runs_status", "status"),
        Index(
            "uq_runs_experiment_key",
            "experiment_id",
            "key",
            unique=True,
            sqlite_where=text("key IS NOT NULL"),
            postgresql_where=text("key IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(300))
    #: The identity its trainer's client gave it (W&B's run id), unique within the experiment; a registration with
    #: it attaches here before any rule by name. NULL: registered without one.
    key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    seed: Mapped[int | None] = mapped_column(Integer, nullable=True)
    task: Mapped[str | None] = mapped_column(String(200), nullable=True)
    model: Mapped[str | None] = mapped_column(String(300), nullable=True)
    #: The run's own full recipe (a run registered with one), or NULL when ``recipe_delta`` is set: read a run's
    #: recipe through ``server.lifecycle.recipes.effective_recipe`` only.
    recipe: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: What the run's recipe changes in its experiment's ``base_recipe`` (``server.lifecycle.recipes``; NULL:
    #: ``recipe``).
    recipe_delta: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    overrides: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    budget: Mapped[float | None] = mapped_column(Float, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    status_reason: Mapped[str] = mapped_column(Text, default="")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    #: Starts that ended with the worker handing the run back on shutdown (not counted against automatic retries).
    releases: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    lease_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    n_points: Mapped[int] = mapped_column(Integer, default=0)
    #: Stored points with a pass rate: the curve a fit reads (points are append-only, so the count identifies it).
    curve_points: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    compute_used: Mapped[float] = mapped_column(Float, default=0.0)
    last_step: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    latest_fit_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: The unit the run reports compute in, when it said (None: the experiment's). Runs of different units are
    #: never compared.
    compute_unit: Mapped[str | None] = mapped_column(String(50), nullable=True)
    #: When the run's trainer was last heard from (a metrics batch or a heartbeat); NULL: never.
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    #: How often the trainer's client promised a heartbeat (NULL: none; such a run is never taken for crashed).
    heartbeat_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: The user's description of the run: a flat config (name -> scalar), tags, free-text notes.
    config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    tags: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    notes: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: What the user reports as the run's outcome (name -> scalar; W&B's ``run.summary``).
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class RunTransition(Base):
    __tablename__ = "run_transitions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    from_status: Mapped[str | None] = mapped_column(String(20), nullable=True)
    to_status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StoredPoint(Base):
    """A stored metric point (the REST shape is ``server.intake.schemas.MetricPoint``, the engine's
    ``rl_core.contracts.points.MetricPoint``)."""

    __tablename__ = "metric_points"
    __table_args__ = (Index("ix_metric_points_curve", "run_id", "curve_index"),)

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    compute: Mapped[float] = mapped_column(Float)
    pass_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: When the service stored the point (NULL for points stored before it was recorded): the wall-time axis of
    #: the run comparison. It is the arrival time, not the trainer's own clock.
    received_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True, default=utcnow, server_default=func.now()
    )
    #: Rank among the run's points with a pass rate (0, 1, ... in step order; NULL without one): the point fit reads
    #: its evenly thinned curve by rank through ``ix_metric_points_curve`` (``server.assess.point_fit.load_fit_curve``).
    curve_index: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class FitSnapshot(Base):
    __tablename__ = "fit_snapshots"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(10))
    n_points: Mapped[int] = mapped_column(Integer)
    compute_max: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(30))
    A: Mapped[float | None] = mapped_column(Float, nullable=True)
    B: Mapped[float | None] = mapped_column(Float, nullable=True)
    C_mid: Mapped[float | None] = mapped_column(Float, nullable=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RecommendationSnapshot(Base):
    __tablename__ = "recommendation_snapshots"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    body: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (Index("ix_events_experiment_id_id", "experiment_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    type: Mapped[str] = mapped_column(String(30))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StoredAssessment(Base):
    """The experiment's latest assessment (server/assess/assessing.py): one row per experiment, replaced when its data
    or runs change; ``version`` only grows. Every surface reads it; none computes a fit or a decision of its own."""

    __tablename__ = "assessments"

    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(64))
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    computed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: When its computation started reading: an assessment is never replaced by one that read older data.
    data_as_of: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AssessmentMoment(Base):
    """A moment of an experiment's decisions, read from a stored assessment and added in the transaction that stored
    it (``server.assess.moments``): append-only, never updated; the scorecard (``server.assess.scorecard``) reads
    them. ``kind``: ``verdict`` (the verdict became decided, named another best run, or was undecided again),
    ``forecast`` (a run's forecast at a share of its budget), ``stop`` / ``resume`` (a run stopped or brought
    back, with its forecast then)."""

    __tablename__ = "assessment_moments"
    __table_args__ = (Index("ix_assessment_moments_experiment_id_id", "experiment_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    #: The stored assessment's version it was read from.
    version: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(20))
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Job(Base):
    """Work a request started and a status URL reports (``server.assess.jobs``): one row per job, in the database so
    that any server process sharing it answers ``GET /api/v1/jobs/{id}``. At most one job of a ``kind`` per experiment
    is ``queued`` or ``running`` (``uq_jobs_active``); ``heartbeat_at`` is renewed by the process that runs it
    (``owner``) while it is queued or running, so a job whose process stopped is told apart from a slow one."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index(
            "uq_jobs_active",
            "experiment_id",
            "kind",
            unique=True,
            sqlite_where=text("status IN ('queued', 'running')"),
            postgresql_where=text("status IN ('queued', 'running')"),
        ),
        Index("ix_jobs_finished_at", "finished_at"),
    )

    #: Random (``uuid4().hex``): a status URL names nothing that can be enumerated.
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(30))
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    #: ``queued``, ``running``, ``succeeded`` or ``failed``.
    status: Mapped[str] = mapped_column(String(20))
    actor: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
