"""Response bodies of what the service computes: fits and their predictions, recommendations and the reach of a
target (the verdict's are in :mod:`server.assess.verdict_schemas`). Invariant: every float is JSON-safe (unknown is
``null``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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


class RecommendationOut(BaseModel):
    run_id: int
    run_name: str
    action: Literal["stop", "scale", "continue", "insufficient_data", "unstable", "resume"]
    rule: str = Field(default="", description="The rule that decided (dominated, cannot_matter, threshold, ...).")
    reason: str
    numbers: dict[str, float | None]


class ValueAtBudget(BaseModel):
    """A run's value at its budget as its experiment's stored assessment has it: the one number and interval the runs
    table, the verdict's ranking and the chart show."""

    value: float | None
    lo: float | None
    hi: float | None
    observed: bool = Field(description="The run reached its budget or finished: the value is observed.")
    forecast: str = Field(description="What the value is (the blend of the forecast, or the observation).")
    assessment_version: int


class RecommendationsOut(BaseModel):
    experiment_id: int
    policy: str
    created_at: datetime | None
    recommendations: list[RecommendationOut]


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
    extrapolation: str | None = Field(
        default=None,
        description="Set when compute is more than 10× the run's budget: the warning that the number is an "
        "extrapolation of the fitted curve far past the run's budget (the run page shows it with the number).",
    )
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
