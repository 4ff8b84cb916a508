"""Request and response bodies of the REST API (pydantic). The OpenAPI document is generated from these.

Invariants: every float a client sends is finite; every response is JSON-safe (no NaN/inf: unknown is ``null``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rl_core.contracts.points import MAX_METRICS, MAX_STEP, REASON_MAX
from server.base.safeinput import unstorable
from server.base.types import (
    CONFIG_MAX,
    NOTES_MAX,
    Budget,
    Compute,
    ConfigValue,
    DbId,
    FiniteFloat,
    MetricName,
    Name,
    RunConfig,
    RunTags,
    Seed,
    Text,
)
from server.lifecycle.grid import PolicySpec
from server.lifecycle.status import Action, ResumePolicy, RunStatus
from server.lifecycle.tokens import Scope


class Strict(BaseModel):
    """Request bodies: unknown keys and wrong types are refused (no string-to-number or bool-to-number coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorOut(BaseModel):
    detail: Any = Field(description="What was wrong and what is allowed (a string, or a list of validation errors).")


# ---- metrics ---------------------------------------------------------------------------------------------------


class MetricPoint(Strict):
    """One measurement of a run (``rl_core.contracts.points.to_rest`` builds it; its limits are defined there).
    ``(run, step)`` identifies it: resending the same point changes nothing."""

    step: Annotated[int, Field(ge=0, le=MAX_STEP)]
    compute: Compute = Field(description="Cumulative training compute at this step (e.g. GPU-hours).")
    pass_rate: Annotated[float | None, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = Field(
        default=None, description="Held-out pass rate in [0, 1]; points without it are stored but not fitted."
    )
    metrics: dict[MetricName, FiniteFloat] = Field(
        default_factory=dict,
        max_length=MAX_METRICS,
        description="Any other named, finite metrics (loss, entropy, ...).",
    )


class MetricsBatchIn(Strict):
    """A batch of points (at most the server's ``max_points_per_batch``). A body that is not entirely valid is
    still accepted point by point: bad points are rejected, good ones stored."""

    points: list[MetricPoint] = Field(min_length=1, max_length=1_000_000)


class RejectedPoint(BaseModel):
    index: int = Field(description="Position of the point in the batch.")
    step: int | None
    errors: list[str]


class FitSummary(BaseModel):
    id: int
    kind: Literal["point", "full"]
    status: str
    message: str
    n_points: int
    compute_max: float = Field(description="The largest compute among the points the fit saw: its data as of.")
    A: float | None
    B: float | None
    C_mid: float | None


class MetricsResult(BaseModel):
    """The answer to a metrics POST; ``action`` tells the trainer to continue or stop."""

    run_id: int
    accepted: int = Field(description="Points stored by this request.")
    duplicates: int = Field(description="Points already stored with the same values (ignored).")
    rejected: list[RejectedPoint] = Field(description="The first 50 rejected points, by index (n_rejected: all).")
    n_rejected: int = Field(default=0, description="Points rejected by this request (rejected lists the first 50).")
    status: RunStatus
    action: Action
    fit: FitSummary | None = Field(
        description=(
            "The run's forecast as stored (its fast point fit; None before the first one). Point fits run off the "
            "request path, at most once per run every point_refit_seconds however many batches arrive: this "
            "batch's evaluations are in it only when fit_pending is false (compute_max says what it saw)."
        )
    )
    fit_pending: bool = Field(
        default=False,
        description="True when the run has evaluations its stored fit has not seen yet; their refit is queued.",
    )


# ---- fits ------------------------------------------------------------------------------------------------------


class PredictionOut(BaseModel):
    compute: float
    mean: float | None
    lo: float | None
    hi: float | None


class CurveFitBody(BaseModel):
    """``rl_core.scaling.CurveFit.to_dict`` with predictions at multiples of the run's budget."""

    model_config = ConfigDict(extra="allow")

    status: str
    message: str
    method: str
    R0: float | None
    A: float | None
    B: float | None
    C_mid: float | None
    ci: dict[str, list[float | None]] | None
    level: float
    n_points: int
    sse: float | None
    burn_in: float | None
    compute_max: float | None
    predictions: list[PredictionOut]
    power_law: dict[str, float | None] | None
    notes: list[str]
    seconds: float
    prior: str | None = Field(
        default=None, description="Version of the shape prior the fit used ('... x grid': with its siblings'), or null."
    )


class FitOut(BaseModel):
    id: int
    run_id: int
    kind: Literal["point", "full"] = Field(description="point: fast fit on ingest; full: with posterior intervals.")
    created_at: datetime
    n_points: int
    compute_max: float
    fit: CurveFitBody


# ---- runs ------------------------------------------------------------------------------------------------------


class RunCreate(Strict):
    """Register a run directly (an external trainer that only wants forecasts)."""

    name: Name
    experiment_id: DbId | None = Field(default=None, description="Defaults to the experiment named 'default'.")
    task: Text | None = Field(default=None, max_length=200)
    model: Text | None = Field(default=None, max_length=300)
    budget: Budget | None = None
    seed: Seed | None = None
    recipe: dict[str, Any] | None = Field(default=None, description="Recipe overrides, validated by rl_core.recipe.")
    preset: Text | None = Field(default=None, max_length=100)
    compute_unit: Text | None = Field(
        default=None,
        min_length=1,
        max_length=50,
        description="The unit the run reports compute in. It must be the experiment's (422 otherwise); in the "
        "'default' experiment, which collects runs of any unit, runs of different units are never compared.",
    )
    resume: ResumePolicy = Field(
        default="never",
        description="When the experiment already has a run of this name: 'never' (409), 'auto' (attach to it while "
        "it is live, i.e. queued, running, stopping or lost; once it ended, register a new run named "
        "'<name>-2', '<name>-3', ...), 'allow' (attach to it, reopening it if it ended; register it if absent) or "
        "'must' (as 'allow', but 404 if there is none). An attached run is answered 200, a new one 201.",
    )
    heartbeat_seconds: Annotated[float | None, Field(ge=1.0, le=86400.0, allow_inf_nan=False)] = Field(
        default=None,
        description="How often the client promises a heartbeat (POST .../heartbeat without a lease, or a metrics "
        "batch). A run silent for longer than the server's silent_after_heartbeats x this becomes 'lost' with an "
        "alert, and 'running' again when it reports. None: no promise; the run is never taken for crashed.",
    )
    config: RunConfig | None = Field(default=None, description="The run's settings (name -> number, string, bool).")
    tags: RunTags | None = None
    notes: Text | None = Field(default=None, max_length=NOTES_MAX)

    @field_validator("recipe")
    @classmethod
    def _storable_recipe(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """NaN/Infinity (JSON ``Infinity``, ``1e999``) or a lone surrogate anywhere in the overrides is refused: the
        recipe is stored as JSON, which cannot hold them (a 500 on PostgreSQL, a silent ``null`` on SQLite)."""
        problems = unstorable(value, "recipe") if value is not None else []
        if problems:
            raise ValueError("; ".join(problems))
        return value


class TrackingExperimentCreate(Strict):
    """Create an experiment by name for runs you train yourself (W&B's ``project``/``group``): no grid document, no
    planned runs. Its runs are registered by their trainers (``POST /api/v1/runs`` with ``experiment_id``)."""

    name: Name
    compute_unit: Text = Field(
        default="gpu_hours", min_length=1, max_length=50, description="The unit every run of it reports compute in."
    )
    budget: Budget | None = Field(default=None, description="The budget of runs registered without one.")
    task: Text | None = Field(default=None, max_length=200, description="A free-text label (runs inherit it).")
    model: Text | None = Field(default=None, max_length=300, description="A free-text label (runs inherit it).")
    description: Text = Field(default="", max_length=2000)
    exist_ok: bool = Field(
        default=False, description="Return the experiment of that name if it exists (200) instead of a 409."
    )
    policy: PolicySpec | None = Field(
        default=None,
        description="How its recommendations are used (``mode: auto_stop`` stops the runs told to stop) and the "
        "decision's numbers, as in a grid document; PUT .../policy changes it later. An existing experiment "
        "(``exist_ok``) keeps its own.",
    )


class TransitionOut(BaseModel):
    from_status: RunStatus | None
    to_status: RunStatus
    reason: str
    actor: str
    attempt: int
    at: datetime


class RecommendationOut(BaseModel):
    run_id: int
    run_name: str
    action: Literal["stop", "scale", "continue", "insufficient_data", "unstable", "resume"]
    rule: str = Field(default="", description="The rule that decided (dominated, cannot_matter, threshold, ...).")
    reason: str
    numbers: dict[str, float | None]


class RunOut(BaseModel):
    id: int
    experiment_id: int
    name: str
    seed: int | None
    task: str | None
    model: str | None
    recipe: dict[str, Any] | None
    overrides: dict[str, Any]
    budget: float | None
    status: RunStatus
    status_reason: str
    action: Action
    attempts: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    n_points: int
    compute_used: float
    last_step: int | None
    latest_fit_id: int | None
    last_seen_at: datetime | None = Field(default=None, description="When its trainer was last heard from.")
    config: dict[str, Any] = Field(default_factory=dict)
    summary: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    notes: str = ""


class ValueAtBudget(BaseModel):
    """A run's value at its budget as its experiment's stored assessment has it: the one number and interval the runs
    table, the verdict's ranking and the chart show."""

    value: float | None
    lo: float | None
    hi: float | None
    observed: bool = Field(description="The run reached its budget or finished: the value is observed.")
    forecast: str = Field(description="What the value is (the blend of the forecast, or the observation).")
    assessment_version: int


class RunDetail(RunOut):
    transitions: list[TransitionOut]
    fit: FitOut | None = Field(description="Latest fast point fit (refreshed by every metrics batch).")
    forecast: FitOut | None = Field(
        description="Latest fit with posterior intervals (computed off the request path); its ``predictions`` are "
        "that fit's own forecasts at the configured compute factors, a different thing from ``at_budget``."
    )
    at_budget: ValueAtBudget | None = Field(
        default=None,
        description="The run's value at its budget from the experiment's latest assessment (None until assessed): "
        "the same value and interval as the runs table, the verdict and the chart.",
    )
    fit_pending: bool = Field(
        default=False,
        description="True while stored evaluations are newer than ``fit`` (its refit is queued): read again for "
        "a fit that has seen every point, e.g. right after the run finished.",
    )


class StatusChange(Strict):
    """Report a status the trainer reached (running, succeeded, failed, stopped) or request one."""

    status: RunStatus
    reason: Text = Field(min_length=1, max_length=REASON_MAX)
    lease_id: Text | None = Field(default=None, description="Required when the run is leased by a worker.")


class Reason(Strict):
    reason: Text = Field(default="requested by user", min_length=1, max_length=2000)


class BudgetChange(Strict):
    budget: Budget
    reason: Text = Field(default="budget extended by user", min_length=1, max_length=2000)


class ClaimIn(Strict):
    worker: Text = Field(min_length=1, max_length=200)
    experiment_id: DbId | None = None
    lease_seconds: Annotated[float | None, Field(gt=0.0, le=86400.0, allow_inf_nan=False)] = None


class Lease(BaseModel):
    run: RunOut
    lease_id: str
    lease_expires_at: datetime


class HeartbeatIn(Strict):
    """A worker renews its lease (``lease_id``); a trainer of its own (no lease) says it is alive."""

    lease_id: Text | None = Field(default=None, min_length=1, max_length=64)
    lease_seconds: Annotated[float | None, Field(gt=0.0, le=86400.0, allow_inf_nan=False)] = None
    heartbeat_seconds: Annotated[float | None, Field(ge=1.0, le=86400.0, allow_inf_nan=False)] = Field(
        default=None, description="Without a lease: how often the next heartbeats will come (see RunCreate)."
    )


class RunLabels(Strict):
    """Change a run's description: each field given replaces the stored one (``config`` is merged key by key; a key
    set to null is removed)."""

    config: dict[str, ConfigValue | None] | None = Field(default=None, max_length=CONFIG_MAX)
    summary: dict[str, ConfigValue | None] | None = Field(
        default=None, max_length=CONFIG_MAX, description="The run's outcome as you report it (merged like config)."
    )
    tags: RunTags | None = None
    notes: Text | None = Field(default=None, max_length=NOTES_MAX)


class HeartbeatOut(BaseModel):
    run_id: int
    status: RunStatus
    action: Action
    lease_expires_at: datetime | None


# ---- experiments -----------------------------------------------------------------------------------------------


class ExpandedRun(BaseModel):
    name: str
    seed: int | None
    overrides: dict[str, Any]
    recipe: dict[str, Any]
    budget: float


class EvaluationsOut(BaseModel):
    """How many evaluations a run's budget is expected to buy, from earlier runs of the same task and model."""

    per_unit: float = Field(description="Median evaluations per unit of compute of the earlier runs.")
    from_runs: int
    per_run: float = Field(description="Expected evaluations of one run (compute > 0).")
    after_burn_in: float
    needed: int = Field(description="The fit's minimum number of evaluations after the burn-in.")
    budget_needed: float = Field(description="The smallest budget expected to give that many.")
    basis: str = Field(default="", description="Where the estimate comes from: earlier runs, or the document itself.")


class DryRunOut(BaseModel):
    name: str
    runs: list[ExpandedRun]
    n_runs: int
    total_budget: float
    evaluations: EvaluationsOut | None = Field(
        default=None, description="Expected evaluations per run; null without earlier runs of this task and model."
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="'key: problem' lines that do not stop the experiment (e.g. too few evaluations).",
    )
    fit_prior: str = Field(
        default="",
        description="The shape prior the experiment would be fitted with ('fit.prior: team' is learned at submission).",
    )


class ExperimentOut(BaseModel):
    id: int
    name: str
    policy: str
    created_at: datetime
    document: dict[str, Any]
    fit_prior: str = Field(
        default="", description="The shape prior the experiment's fits use, and why (the document's `fit`, in words)."
    )
    n_runs: int
    status_counts: dict[str, int]


class ExperimentDetail(ExperimentOut):
    """The experiment with one page of its runs, in id order (``runs_limit`` from ``runs_offset`` of the request;
    ``n_runs`` counts them all)."""

    runs: list[RunOut]
    runs_next: str | None = Field(
        default=None, description="The URL of the next page of runs (same endpoint, next runs_offset); null: the last."
    )


class ExperimentCreated(ExperimentDetail):
    """The creation answer: the experiment with the first page of its runs (``runs_limit`` of the request;
    ``n_runs`` counts them all) and ``runs_next``, the paged runs listing that continues it (null: all shown)."""

    runs_next: str | None


class RecommendationsOut(BaseModel):
    experiment_id: int
    policy: str
    created_at: datetime | None
    recommendations: list[RecommendationOut]


class RankedRun(BaseModel):
    """A run in the verdict's ranking: the fit and the forecast at the budget its decision used."""

    run_id: int
    run_name: str
    A: float | None
    A_lo: float | None
    A_hi: float | None
    B: float | None
    C_mid: float | None
    V_budget: float | None = Field(
        description="Pass rate at the run's budget: the forecast's median, or the observed mean of its last "
        "evaluations once it reached its budget or finished (``observed``)."
    )
    V_lo: float | None
    V_hi: float | None
    observed: bool = Field(default=False, description="V_budget is observed (the run reached its budget or finished).")
    action: str = Field(description="The run's current recommendation; 'none' for a finished run (no advice).")
    rule: str
    fit_status: str


class VerdictOut(BaseModel):
    """The CI gate: which run is best, by how much, how sure, and whether that is decided."""

    experiment_id: int
    decided: bool
    best_run_id: int | None
    best_run_name: str | None
    runner_up_id: int | None
    runner_up_name: str | None
    basis: Literal["observed", "forecast", "none"] = Field(
        description="observed: both the best run and the runner-up reached their budget (or finished) and are "
        "compared on their final evaluations; forecast: either is compared on its forecast at the budget."
    )
    difference_at_budget: float | None = Field(
        description="Best run's value at the budget minus the runner-up's (never negative)."
    )
    confidence: float | None = Field(
        description="Probability that the best run ends higher at the budget than the runner-up."
    )
    reason: str
    finished: bool = Field(description="True when no run is queued, running or stopping.")
    ranking: list[RankedRun]
    waiting_for: list[str] = Field(
        default_factory=list,
        description="Runs that could still win but have no usable forecast yet (queued, running or resumable): "
        "while any is left the verdict is not decided.",
    )
    others_dominated: bool = Field(default=False, description="Every rival of the best run is stopped or dominated.")
    assessment_version: int = Field(default=0, description="The stored assessment this verdict is part of (0: none).")
    computed_at: datetime | None = Field(default=None, description="When that assessment was computed.")


# ---- tokens ----------------------------------------------------------------------------------------------------


class TokenCreate(Strict):
    name: Name
    scopes: list[Scope] = Field(min_length=1)


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    scopes: list[Scope]
    created_at: datetime
    revoked_at: datetime | None


class TokenCreated(TokenOut):
    token: str = Field(description="The secret; shown only once.")


class Health(BaseModel):
    """Liveness: answered from the event loop, without the database (``database`` is the configured kind)."""

    status: Literal["ok"]
    database: str
    version: str


class Readiness(BaseModel):
    """Readiness: the database's answer time and each background fitter's backlog (keys due) and lag (seconds the
    oldest due key has waited); ``problems`` says why it is not ready."""

    status: Literal["ready", "not_ready"]
    database: str
    database_ms: float | None
    fitter_pending: dict[str, int]
    fitter_lag_seconds: dict[str, float]
    problems: list[str]
    version: str


class ReachOut(BaseModel):
    """Compute for a run to reach a target pass rate (from its full fit), and wall-clock ETAs at its pace."""

    run_id: int
    target: float
    compute: float | None = Field(description="Compute at which the fitted curve reaches the target (None: never).")
    reachable: bool | None = Field(description="False when the fitted ceiling is below the target.")
    lo: float | None
    hi: float | None = Field(
        description="Upper end of the interval (None when part of the posterior never gets there)."
    )
    probability: float | None = Field(description="Posterior probability that the target is ever reached.")
    reason: str
    compute_used: float
    budget: float | None
    compute_per_second: float | None = Field(description="The run's pace: compute used per wall-clock second.")
    eta_seconds: float | None = Field(description="Wall-clock seconds to the target at the current pace.")
    eta_budget_seconds: float | None = Field(description="Wall-clock seconds to the end of the budget.")
    as_of: datetime | None
    n_points: int
    fit_pending: bool = Field(
        default=False,
        description="True when the run's full fit for its current points is not computed yet: it is queued (reads "
        "never fit) and compute, lo, hi and probability are null until it is; ask again shortly.",
    )
