"""The metric point as the REST API takes it, a batch of them, and a refused point with its reasons.

Invariant: every float a client sends is finite (:mod:`rl_core.contracts.points` holds the limits).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from rl_core.contracts.points import MAX_METRICS, MAX_STEP
from server.base.schemas import Strict
from server.base.types import (
    Compute,
    FiniteFloat,
    MetricName,
)


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
