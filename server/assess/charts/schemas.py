"""Response bodies of the dashboard read models (charts, rankings, comparisons, histories)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from server.assess.schemas import Band, FitEstimates, Series
from server.lifecycle.status import RunStatus


class Forecast(BaseModel):
    compute: float
    mean: float | None
    lo: float | None
    hi: float | None


class ChartRun(FitEstimates):
    """One run on the experiment chart: its (downsampled) points, fitted curve, extrapolation and band."""

    id: int
    name: str
    index: int = Field(description="Position in the experiment (by id): the run's colour everywhere.")
    status: RunStatus
    status_reason: str
    overrides: dict[str, Any]
    budget: float | None
    compute_used: float
    n_points: int
    highlighted: bool
    fit_status: str
    fit_message: str
    level: float
    at_budget: Forecast | None
    rank_ceiling: int | None
    rank_at_budget: int | None
    points: Series
    points_total: int
    fitted: Series | None = Field(
        description="The fitted R(C) over the observed compute range: the sigmoid's posterior median."
    )
    extrapolation: Series | None = Field(
        description="The forecast from the last observed compute to the budget: the value the table and verdict show "
        "(``forecast`` says what it is, e.g. the sigmoid blended with the power law); none once the run's value is "
        "observed."
    )
    forecast: str = Field(default="", description="What the extrapolation and the value at the budget are.")
    band: Band | None = Field(
        description="The curve's interval past the data (highlighted runs only); at the budget "
        "it is the forecast's [lo, hi]."
    )
    burn_in: float | None = Field(
        default=None, description="Points below this compute were left out of the fit (burn-in); None: none."
    )


class ChartOut(BaseModel):
    experiment_id: int
    name: str
    compute_unit: str
    max_budget: float | None
    highlight: int
    last_event_id: int = Field(description="Stream the experiment's events after this id to stay current.")
    as_of: datetime = Field(description="When these fits were read: they reflect every point stored until then.")
    as_of_step: int | None = Field(description="The largest step any run had reported by then.")
    runs: list[ChartRun]
    assessment_version: int = Field(default=0, description="The stored assessment the curves come from (0: none).")
    computed_at: datetime | None = Field(default=None, description="When that assessment was computed.")
    pending: bool = Field(default=False, description="The experiment changed since: a newer one is coming.")


class BestRun(BaseModel):
    run_id: int
    run_name: str
    A: float
    A_lo: float | None
    A_hi: float | None


class ExperimentSummary(BaseModel):
    id: int
    name: str
    description: str
    created_at: datetime
    policy: str
    task: str | None
    model: str | None
    compute_unit: str
    n_runs: int
    status_counts: dict[str, int]
    compute_used: float
    total_budget: float
    best: BestRun | None = Field(
        description="The run with the highest identified ceiling; null when no ceiling is identified, or when a run "
        "ranked above it by value at the budget (the verdict's order) has a ceiling not identified yet "
        "(ceiling_note says which)."
    )
    ceiling_note: str | None = Field(
        default=None,
        description="Why no best ceiling is named although one is identified: the runs that lead on value at the "
        "budget and whose ceilings are not identified yet (still rising).",
    )
    recommendations: dict[str, int]
    alerts: dict[str, int] = Field(description="Stored alerts of the experiment by severity.")


class RunSeries(BaseModel):
    """A run's points and other metrics against step (downsampled), and its current forecast."""

    run_id: int
    experiment_id: int
    compute_unit: str
    points: Series
    points_steps: list[int]
    points_total: int
    metrics: dict[str, Series]
    fitted: Series | None
    extrapolation: Series | None
    band: Band | None
    fit_status: str
    fit_message: str
    burn_in: float | None = Field(
        default=None, description="Points below this compute were left out of the fit (burn-in); None: none."
    )
    last_event_id: int = Field(description="Stream the experiment's events after this id to stay current.")
    assessment_version: int = Field(default=0, description="The stored assessment the forecast comes from.")


class HistoryPoint(BaseModel):
    id: int
    kind: Literal["point", "full"]
    created_at: datetime
    n_points: int
    compute_max: float
    status: str
    A: float | None
    A_lo: float | None
    A_hi: float | None
    at_budget: float | None
    at_budget_lo: float | None
    at_budget_hi: float | None


class FitHistory(BaseModel):
    run_id: int
    budget: float | None
    total: int
    snapshots: list[HistoryPoint]
    observed_latest: float | None = Field(description="Mean pass rate of the run's last few points.")
    observed_at_budget: float | None = Field(description="The same, once the run has reached its budget.")


class RunLog(BaseModel):
    """The tail of a run's engine log (the engine's output, written by the worker in the run's directory)."""

    run_id: int
    run_status: RunStatus
    available: bool = Field(description="False when this server cannot read the log (``reason`` says why).")
    reason: str = ""
    size: int = Field(default=0, description="The whole log's size in bytes.")
    truncated: bool = Field(default=False, description="True when only the tail is returned.")
    lines: list[str] = Field(default_factory=list)
    error_lines: list[int] = Field(
        default_factory=list, description="Indexes into ``lines`` of the last traceback and of lines naming an error."
    )


class MetricRun(BaseModel):
    run_id: int
    name: str
    seed: int | None
    group: str = Field(description="Runs with the same recipe (other seeds) share this key.")
    group_label: str = Field(description="The run's name without its seed.")
    x: list[float]
    y: list[float]
    without_time: int = Field(
        0, description="x=time: points left out because they were stored before arrival times were recorded."
    )


class MetricSeries(BaseModel):
    """One metric of chosen runs against step, compute or wall time (downsampled per run), for the run comparison."""

    experiment_id: int
    metric: str
    x: Literal["step", "compute", "time"]
    x_label: str = Field(
        description="What x is; time: seconds since the run's first point, as the service received it."
    )
    compute_unit: str
    metrics: list[str] = Field(description="The metrics these runs reported (pass_rate first).")
    runs: list[MetricRun]
