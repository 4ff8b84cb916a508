"""Request and response bodies of experiments, runs and tokens (pydantic). The OpenAPI document is generated from
these and the other rooms' schemas.

Invariants: every float a client sends is finite; every response is JSON-safe (no NaN/inf: unknown is ``null``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StringConstraints, field_validator, model_validator

from rl_core.contracts.points import REASON_MAX
from server.base.safeinput import unstorable
from server.base.schemas import Strict
from server.base.types import (
    CONFIG_MAX,
    NOTES_MAX,
    Budget,
    ConfigValue,
    DbId,
    Name,
    RunConfig,
    RunTags,
    Seed,
    Text,
)
from server.lifecycle.grid import PolicySpec
from server.lifecycle.status import Action, ResumePolicy, RunStatus
from server.lifecycle.tokens import Scope

#: A run's key (``RunCreate.key``): what W&B run ids and this client's generated keys are made of.
RunKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


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
    key: RunKey | None = Field(
        default=None,
        description="The run's identity as its client knows it (W&B's run id; letters, digits, '_', '-', '.'; at "
        "most 64): a run of this experiment holding the key is the run meant, whatever its name, before any rule "
        "by name. A run attached by name takes the key.",
    )
    resume: ResumePolicy = Field(
        default="never",
        description="When a run with this key, or else of this name, exists: 'never' (409), 'auto' (the run with "
        "this key; else the run of this name while it is queued, running, stopping or lost and no trainer is alive "
        "in it, i.e. none heard from within its promised heartbeats; else a new run, named '<name>-2', '<name>-3', "
        "... when the name is taken), 'allow' (attach to it, reopening it if it ended; register it if absent) or "
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


class RunOut(BaseModel):
    id: int
    experiment_id: int
    name: str
    key: str | None = Field(default=None, description="The identity its trainer's client gave it (W&B's run id).")
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
    releases: int = Field(default=0, description="Starts handed back by a worker shutting down (not failures).")
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


class StatusChange(Strict):
    """Report a status the trainer reached (running, succeeded, failed, stopped) or request one."""

    status: RunStatus
    reason: Text = Field(min_length=1, max_length=REASON_MAX)
    lease_id: Text | None = Field(default=None, description="Required when the run is leased by a worker.")
    release: bool = Field(
        default=False,
        description="A worker shutting down hands its leased run back (status lost, with its lease_id): the run "
        "resumes on the next worker and the start does not count against the automatic retries.",
    )

    @model_validator(mode="after")
    def _release_is_a_leased_loss(self) -> StatusChange:
        if self.release and (self.status != "lost" or self.lease_id is None):
            raise ValueError("release: true is only for status 'lost' with the worker's lease_id")
        return self


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
