"""The shape of an experiment's assessment: what every surface (pages, REST, alerts, CLI) reads.

Invariant: every number here comes from one computation (:func:`server.assess.assessing.build_assessment`) on one set of
fits with one set of options; an estimate and its interval come from the same posterior summary
(:mod:`rl_core.scaling.fit.summary`), so ``lo <= value <= hi`` wherever both are present.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from server.assess.verdict_schemas import VerdictOut


class Series(BaseModel):
    x: Sequence[float]
    y: Sequence[float | None]


class Band(BaseModel):
    x: list[float]
    lo: list[float | None]
    hi: list[float | None]


class Comparison(BaseModel):
    run_id: int
    run_name: str
    changes: dict[str, Any] = Field(description="Recipe keys where the run differs from the reference (its values).")
    effect: Literal["ceiling", "efficiency", "not_shown", "none", "unknown"] = Field(
        description="ceiling / efficiency: shown to differ; not_shown: the ceilings differ by more than the margin "
        "without the probability to say so; none: the same within the margin; unknown: not comparable yet."
    )
    direction: Literal["better", "worse", "same", "unknown"]
    A_diff: float | None
    probability_higher: float | None
    A_ref: float | None = None
    A_run: float | None = None
    B_ref: float | None
    B_run: float | None
    reason: str


class ComparisonOut(BaseModel):
    experiment_id: int
    reference_id: int | None
    reference_name: str | None
    reference_kind: Literal["base", "best", "none"]
    margin: float
    rows: list[Comparison]
    skipped: int = Field(description="Runs left out to bound the work (the comparison covers the first ones).")
    fit: str = Field(default="", description="Which fit the comparison reads: the runs table's, always.")


class FitEstimates(BaseModel):
    """A run's fit as one posterior summary (``rl_core.scaling.fit.summary``): every estimate inside its interval."""

    R0: float | None = None
    A: float | None = Field(default=None, description="Ceiling: the posterior median (inside [A_lo, A_hi]).")
    A_lo: float | None = None
    A_hi: float | None = None
    ceiling_identified: bool = Field(
        default=False,
        description="False when the point fit sits on the A = 1 bound or outside its interval: the ceiling is not "
        "identified yet and is never compared as a number.",
    )
    B: float | None = None
    B_lo: float | None = None
    B_hi: float | None = None
    C_mid: float | None = None
    C_mid_lo: float | None = None
    C_mid_hi: float | None = None


class RunAssessment(FitEstimates):
    """One run as the assessment saw it: its fit's summary, its decision and its forecast curves."""

    id: int
    name: str
    status: str
    budget: float | None
    compute_used: float
    n_points: int
    fit_status: str
    fit_message: str
    level: float
    prior: str | None = Field(default=None, description="The shape prior of this run's fit (None: flat priors).")
    V_budget: float | None = Field(
        default=None, description="Forecast pass rate at the budget: the decision's posterior median."
    )
    V_lo: float | None = None
    V_hi: float | None = None
    forecast: str = Field(
        default="",
        description="What V_budget and the band show: the sigmoid blended with a power law (mostly the power law "
        "while the ceiling is not identified) with the band's calibration (rl_core.scaling.fit.calibration), or, "
        "once the run reached its budget or finished, its observed value.",
    )
    action: str = Field(description="The decision's action; 'none' for a finished run (no advice).")
    rule: str
    reason: str
    numbers: dict[str, Any]
    rank_ceiling: int | None = None
    rank_at_budget: int | None = None
    eta_budget_seconds: float | None = Field(
        default=None, description="Wall-clock time to the budget at the run's pace; None for a run that is not live."
    )
    fitted: Series | None = Field(
        default=None, description="The fitted R(C) over the data: the sigmoid's posterior median."
    )
    extrapolation: Series | None = Field(
        default=None,
        description="The forecast (``forecast`` says which) from the last evaluation to the budget, ending at "
        "V_budget; none once the value is observed.",
    )
    band: Band | None = Field(
        default=None,
        description="The interval of the curve from the last evaluation to the budget; at "
        "the budget it is [V_lo, V_hi].",
    )
    burn_in: float | None = None


class AdaptiveBandOut(BaseModel):
    """The experiment's adaptive band (``fit.adaptive_band``; docs/forecasting.md): the multiplier of every run's
    calibrated band half-widths, learned from the experiment's earlier forecasts against the points that arrived
    after them."""

    scale: float = Field(description="Multiplier of the calibrated band's half-widths (1: the shipped band).")
    residuals: int = Field(description="Points scored against earlier forecasts (at least min_reach past their data).")
    runs: int = Field(description="Runs those points come from (each run weighs 1).")
    forecasts: int = Field(description="Earlier forecasts (fit snapshots) scored.")
    applied: bool = Field(
        description="Whether the bands, intervals and the decisions' draws use it (only under "
        "policy.forecast_comparison 'calibrated')."
    )
    note: str = Field(description="What it did, in words.")


class AssessmentOut(BaseModel):
    """An experiment's assessment at one state of its data and runs."""

    experiment_id: int
    version: int = Field(description="Grows by one with each new assessment of the experiment (0: none yet).")
    computed_at: datetime | None
    data_as_of: datetime | None = Field(default=None, description="When its computation started reading the data.")
    state: str = Field(description="Digest of what it was computed from (points, statuses, budgets, options).")
    pending: bool = Field(
        default=False, description="The experiment changed since: a newer assessment is being computed."
    )
    compute_unit: str
    fit: str = Field(description="Which fit every number comes from (grid or per-run, and the prior).")
    policy: str
    runs: list[RunAssessment]
    verdict: VerdictOut
    comparison: ComparisonOut
    counts: dict[str, int] = Field(description="Advice counts over the runs still queued or running.")
    adaptive_band: AdaptiveBandOut | None = Field(
        default=None, description="The experiment's band multiplier when fit.adaptive_band is on (null when off)."
    )


class VerdictMoment(BaseModel):
    """A moment the verdict became decided, named another best run, or was undecided again."""

    assessment_version: int
    decided: bool
    best_run_id: int | None
    best_run_name: str | None
    spent: float = Field(description="Compute every run had used then (the sum of their compute_used).")
    share_of_budget: float | None = Field(description="spent / the grid's total budget (the sum of run budgets).")


class EarlyForecast(BaseModel):
    """A forecast at the budget stored at a share of the run's budget, against the value the run ended with."""

    milestone: float = Field(description="0.3 or 0.5: the first forecast stored at or past this share of the budget.")
    share: float | None = Field(description="The share of its budget the run had used when it was stored.")
    value: float | None
    lo: float | None
    hi: float | None
    error: float | None = Field(description="value - the final observed value.")
    inside: bool | None = Field(description="Whether the final observed value lies in [lo, hi].")


class StopForecast(BaseModel):
    """A stopped run's forecast at the budget in the assessment that saw it stopped."""

    share: float | None = Field(description="The share of its budget the run had used then.")
    value: float | None
    lo: float | None
    hi: float | None


class RunGrade(BaseModel):
    """One run of the scorecard: what its stop saved and how its forecasts did."""

    run_id: int
    run_name: str
    status: str
    budget: float | None
    compute_used: float
    saved: float = Field(description="budget - compute_used for a stopped run; 0 otherwise.")
    stop_forecast: StopForecast | None = Field(
        default=None, description="A stopped run's forecast at the budget in the assessment that saw it stopped."
    )
    last_value: float | None = Field(
        default=None, description="A stopped run's last stored evaluation at the stop: what it had shown."
    )
    final_value: float | None = Field(
        default=None, description="A succeeded run's observed value at the budget (mean of its last evaluations)."
    )
    early: list[EarlyForecast] = Field(
        default_factory=list, description="A succeeded run's forecasts at 30% and 50% of its budget."
    )


class ScorecardOut(BaseModel):
    """What the decisions did on this grid (``server.assess.scorecard``): read from the stored assessment and its
    recorded moments; nothing is fitted or decided for it."""

    experiment_id: int
    assessment_version: int
    finished: bool = Field(description="No run is queued, running or stopping.")
    compute_unit: str
    budget: float = Field(description="The grid's total budget: the sum of its runs' budgets.")
    compute_used: float = Field(description="Compute the runs used (the sum of their compute_used).")
    saved: float = Field(description="Compute the stops saved: the sum over stopped runs of budget - compute_used.")
    saved_share: float | None = Field(description="saved / budget.")
    first_decided: VerdictMoment | None = Field(description="The first stored verdict that was decided.")
    changes: list[VerdictMoment] = Field(
        description="Each later change of the verdict: another best run named, or undecided again."
    )
    decided: bool = Field(description="Whether the current verdict is decided.")
    best_run_id: int | None = Field(description="The run the current verdict ranks first (decided or not).")
    best_run_name: str | None
    runs: list[RunGrade]
    alerts: dict[str, int] = Field(description="Alerts raised for the experiment, by type (suppressed ones too).")
    summary: str = Field(description="The scorecard in one line.")
