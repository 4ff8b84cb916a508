"""The assessment's second step, pure: the library's grid assessment of what :func:`server.assess.gather.gather`
read (:func:`rl_core.scaling.decide.grid_decisions.assess_grid`, the same function the replay benchmark measures).

Invariant: an adaptive band multiplier, when applied, is set on every fit the decision draws from (the current fits
and the hold rule's fits of each run without its newest point), so the band, the interval and the decisions' draws
are scaled alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from rl_core.scaling import CurveFit, GridRun, Recommendation
from rl_core.scaling.decide.grid_decisions import assess_grid
from rl_core.scaling.decide.grid_verdict import GridVerdict
from rl_core.scaling.fit.model import FloatArray
from server.assess.forecasting import Curve
from server.assess.gather import Gathered
from server.assess.runread import grid_status
from server.store.models import Run


@dataclass(frozen=True)
class Decision:
    """The experiment's decision: each run with its recommendation (in run id order), the grid's verdict (whose
    indices are positions in ``runs``) and the fits it drew from (with the band multiplier it applied)."""

    runs: list[tuple[Run, Recommendation]]
    verdict: GridVerdict
    fits: dict[int, CurveFit]
    band_scale: float


def band_scale(g: Gathered) -> float:
    """The adaptive band multiplier the decision applies: the gathered one when the policy compares calibrated
    forecasts, else 1."""
    applied = g.band is not None and g.spec.policy.forecast_comparison == "calibrated"
    return g.band.scale if applied and g.band is not None else 1.0


def grid_runs(g: Gathered) -> list[GridRun]:
    """The runs as the library's decision sees them."""
    return [
        GridRun(
            str(r.id),
            g.curves[r.id].compute,
            g.curves[r.id].pass_rate,
            grid_status(r),
            r.budget,
            r.name,
            g.metrics[r.id],
            g.recipes[r.id],
            g.stop_rules[r.id],
            g.resumes.get(r.id, 0),
        )
        for r in g.runs
    ]


def decide(g: Gathered) -> Decision:
    """Every run's recommendation and the grid's verdict under the experiment's policy. Pure."""
    scale = band_scale(g)
    fits = dict(g.fits) if scale == 1.0 else {rid: replace(f, band_scale=scale) for rid, f in g.fits.items()}

    def fitter(points: Sequence[tuple[FloatArray, FloatArray]]) -> list[CurveFit]:
        fitted = g.prefix_fits([Curve(np.asarray(x), np.asarray(y)) for x, y in points])
        return fitted if scale == 1.0 else [replace(f, band_scale=scale) for f in fitted]

    assessed = assess_grid(grid_runs(g), g.spec.policy, fitter, [fits[r.id] for r in g.runs])
    pairs = list(zip(g.runs, assessed.recommendations, strict=True))
    return Decision(pairs, assessed.verdict, fits, scale)
