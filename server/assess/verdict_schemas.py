"""Response bodies of the verdict (the CI gate, the banner, ``scalerl wait``): the best run, the ranking, the
leave-one-out ablations and the work-spread check. Invariant: every float is JSON-safe (unknown is ``null``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

#: What the work-spread check counts: tokens processed, or optimizer steps.
WorkKind = Literal["tokens", "steps"]


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


class AblationOut(BaseModel):
    """A leave-one-out variant against the base recipe, on their value at the budget (the verdict's draws)."""

    component: str = Field(description="The variant's stable name, e.g. loo-no-fp32-head.")
    label: str = Field(description="What was removed, for people: e.g. 'no FP32 head'.")
    runs: list[str] = Field(description="The variant's runs (its seeds); its value is their mean.")
    difference: float | None = Field(
        description="The variant's value at the budget minus the base's (negative: removing the component costs)."
    )
    probability_lower: float | None = Field(description="P(the variant ends lower at the budget than the base).")
    basis: Literal["observed", "forecast", "none"]
    finding: Literal["costs", "helps", "not_shown", "no_value"] = Field(
        description="costs / helps: the variant ends lower / higher than the base with at least the verdict's "
        "min_confidence; not_shown: not shown to differ; no_value: the variant or the base has no value yet."
    )
    text: str = Field(description="The line the banner and scalerl wait print, e.g. 'no FP32 head: −0.074, P > 0.99'.")


class WorkSpreadOut(BaseModel):
    """The runs' work (tokens, else steps) per compute unit differ by more than the policy allows
    (``max_work_spread``)."""

    ratio: float = Field(
        description="The largest work (tokens or steps) per compute unit over the smallest (runs with ≥ 3 points)."
    )
    threshold: float = Field(description="The policy's max_work_spread.")
    work: WorkKind = Field(
        default="steps",
        description="What work is counted: tokens processed (when every run reports the engine's token counters: "
        "a recipe that shortens responses gets more steps for the same tokens) or optimizer steps.",
    )
    work_per_compute: dict[str, float] = Field(description="Each counted run's work per compute unit, by name.")
    best_vs_runner_up: float | None = Field(
        default=None, description="The best run's work per compute unit over the runner-up's."
    )
    equal_work_confidence: float | None = Field(
        default=None,
        description="P(best > runner-up) with the runner-up valued at best_vs_runner_up × its budget (as much work "
        "as the best got); null when the best got no more work per unit (the spread cannot explain its lead) or "
        "when it cannot be computed.",
    )
    robust: bool | None = Field(
        default=None,
        description="Whether the best run's lead holds at equal work at the verdict's min_confidence (null: no "
        "runner-up).",
    )
    warning: str


class VerdictOut(BaseModel):
    """The CI gate: which run is best, by how much, how sure, and whether that is decided. Left out, a field is the
    verdict with nothing ranked (no best run, no runner-up, no confidence)."""

    experiment_id: int
    decided: bool = False
    best_run_id: int | None = None
    best_run_name: str | None = None
    runner_up_id: int | None = None
    runner_up_name: str | None = None
    basis: Literal["observed", "forecast", "none"] = Field(
        default="none",
        description="observed: both the best run and the runner-up reached their budget (or finished) and are "
        "compared on their final evaluations; forecast: either is compared on its forecast at the budget.",
    )
    difference_at_budget: float | None = Field(
        default=None, description="Best run's value at the budget minus the runner-up's (never negative)."
    )
    confidence: float | None = Field(
        default=None, description="Probability that the best run ends higher at the budget than the runner-up."
    )
    reason: str
    finished: bool = Field(description="True when no run is queued, running or stopping.")
    ranking: list[RankedRun] = Field(default_factory=list)
    summary: str | None = Field(
        default=None,
        description="The comparison in words, without where the verdict stands (``reason`` is it followed by the "
        "standing in brackets); null in verdicts stored before this field existed.",
    )
    state: Literal["no_comparison", "units", "waiting", "work_spread", "below", "decided"] | None = Field(
        default=None,
        description="Where the verdict stands: no_comparison (nothing to compare the best run with yet), units "
        "(runs report compute in different units), waiting (a run in waiting_for could still win), work_spread (the "
        "lead could be the runs' different work per compute unit), below (P(higher) under min_confidence), or "
        "decided; null in verdicts stored before this field existed.",
    )
    decided_by: Literal["confidence", "dominance"] | None = Field(
        default=None,
        description="What decided it: P(higher) reached min_confidence, or every other recipe is dominated or "
        "stopped (null while undecided).",
    )
    decided_early: bool = Field(
        default=False, description="Decided with runs still in waiting_for (decide_early): they were ignored."
    )
    waiting_for: list[str] = Field(
        default_factory=list,
        description="Runs that could still win but have no usable forecast yet (queued, running or resumable): "
        "while any is left the verdict is not decided.",
    )
    others_dominated: bool = Field(default=False, description="Every rival of the best run is stopped or dominated.")
    ablations: list[AblationOut] = Field(
        default_factory=list,
        description="A leave-one-out grid: each removed component against the base recipe, at the budget.",
    )
    ablation_summary: str | None = Field(
        default=None,
        description="The ablations in one line, e.g. 'no FP32 head: −0.074, P > 0.99; no NPR: not shown to differ'.",
    )
    work_spread: WorkSpreadOut | None = Field(
        default=None,
        description="Set when the runs' work (tokens or steps) per compute unit differs by more than max_work_spread.",
    )
    assessment_version: int = Field(default=0, description="The stored assessment this verdict is part of (0: none).")
    computed_at: datetime | None = Field(default=None, description="When that assessment was computed.")
