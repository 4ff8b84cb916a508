"""Fitting and forecasting the sigmoidal compute-performance curve of the ScaleRL paper.

Importing this package never imports torch. Three jobs, three subpackages, layered by import-linter:
:mod:`.fit` (curves, priors, posteriors, grid fits and the questions a fit answers), :mod:`.decide` (stop and scale
decisions, which use fits) and :mod:`.measure` (backtests and replays, which use both). Entry points: :func:`fit_curve`
(a forecast from raw points), :func:`decide_grid`, :func:`recommend_run` and :mod:`.measure.backtest`.
"""

from rl_core.scaling.decide.grid_decisions import GridRun, decide_grid, recommend_set
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation, RunState, recommend_run
from rl_core.scaling.decide.rules import Divergence, Guard, Patience, Rules, Threshold
from rl_core.scaling.fit.fit_paper import PaperGrid
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, Prediction, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.model import PowerLawParams, SigmoidParams, power_law, sigmoid
from rl_core.scaling.fit.questions import (
    CeilingComparison,
    Gain,
    Reach,
    compare_ceilings,
    compute_to_reach,
    gain_from_scaling,
    value_at,
)

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
