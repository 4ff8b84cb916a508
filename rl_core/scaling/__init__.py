"""Fitting and forecasting the sigmoidal compute-performance curve of the ScaleRL paper.

Importing this package never imports torch. Entry points: :func:`fit_curve` (a forecast from raw points), the
questions in :mod:`.questions`, the recommendations in :mod:`.recommend`, and :mod:`.backtest`.
"""

from rl_core.scaling.fit_paper import PaperGrid
from rl_core.scaling.forecast import CurveFit, FitOptions, Prediction, fit_curve
from rl_core.scaling.grid_decisions import GridRun, decide_grid, recommend_set
from rl_core.scaling.grid_fit import fit_grid
from rl_core.scaling.model import PowerLawParams, SigmoidParams, power_law, sigmoid
from rl_core.scaling.questions import (
    CeilingComparison,
    Gain,
    Reach,
    compare_ceilings,
    compute_to_reach,
    gain_from_scaling,
    value_at,
)
from rl_core.scaling.recommend import Policy, Recommendation, RunState, recommend_run
from rl_core.scaling.rules import Divergence, Guard, Patience, Rules, Threshold

__all__ = [
    "CeilingComparison",
    "CurveFit",
    "Divergence",
    "FitOptions",
    "Gain",
    "GridRun",
    "Guard",
    "PaperGrid",
    "Patience",
    "Policy",
    "PowerLawParams",
    "Prediction",
    "Reach",
    "Recommendation",
    "Rules",
    "RunState",
    "SigmoidParams",
    "Threshold",
    "compare_ceilings",
    "compute_to_reach",
    "decide_grid",
    "fit_curve",
    "fit_grid",
    "gain_from_scaling",
    "power_law",
    "recommend_run",
    "recommend_set",
    "sigmoid",
    "value_at",
]
