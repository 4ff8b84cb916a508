"""Answers composed of several rooms' shapes (a run with its fits, the result of a metrics batch) and the health
probes' bodies."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from server.assess.fit_schemas import FitOut, FitSummary, ValueAtBudget
from server.intake.schemas import RejectedPoint
from server.lifecycle.schemas import RunOut, TransitionOut
from server.lifecycle.status import Action, RunStatus


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
