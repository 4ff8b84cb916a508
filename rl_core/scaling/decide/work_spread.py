"""Runs that got different work for the same compute: the verdict's check on the work each run got per unit.

A run's compute is what its trainer reports (device-hours, GPU-hours, tokens...). Where compute is wall time,
another program on the machine inflates it: a run under contention gets less work done for the same compute, and
then its curve against compute is lower for a reason that has nothing to do with its recipe. The rule:

- each run's *work* is the tokens it processed where its trainer reports them (the engine's
  ``compute/generator_tokens`` + ``compute/trainer_tokens``), else its optimizer steps; its *work rate* is the
  work of its latest stored point over that point's compute (runs with fewer than :data:`MIN_POINTS` points, or no
  positive work and compute, are left out). Tokens first: a recipe that shortens responses (a higher learning rate,
  a length penalty) buys more steps per unit for the same tokens, which is the recipe's effect, not contention
  (the demo's learning-rate grid: 738 to 1,029 steps for one budget, tokens per unit within a few percent);
- the grid's *spread* is the largest work rate over the smallest; above ``Policy.max_work_spread`` (1.2: the
  rates differ by more than 20%) every surface of the verdict warns;
- and the verdict is not decided on a difference that spread could explain. The best run's lead is *robust* to it
  when the best run got no more steps per unit than the runner-up (then the spread cannot have given it its lead),
  or when it holds at equal work: the runner-up, valued at ``q`` × its budget (``q`` = the best's work rate over
  the runner-up's: the compute at which it would have got as many steps as the best got for its budget), from its
  fit's draws, still ends below the best with the verdict's ``min_confidence``
  (:func:`equal_work_confidence`; the same draws and P(higher) the verdict uses).

Invariant: numpy/scipy only; nothing here reads a database: the service passes each run's latest (step, compute).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rl_core.scaling.decide.grid_decisions import value_draws
from rl_core.scaling.decide.grid_verdict import GridVerdict, p_higher
from rl_core.scaling.fit.calibration import Comparison
from rl_core.scaling.fit.forecast import CurveFit

#: A run needs this many points before its work rate counts (the verdict's own minimum of evaluations).
MIN_POINTS = 3
_EQUAL_WORK_SALT = 7919


def work_rates(latest: Mapping[int, tuple[float, float, int]]) -> dict[int, float]:
    """Work per compute unit of each run with enough points, from ``latest``: run key → (work, compute, points)
    of its latest stored point (work: tokens or steps, one kind for every run)."""
    return {
        k: float(work) / float(compute)
        for k, (work, compute, points) in latest.items()
        if points >= MIN_POINTS and work > 0 and compute > 0 and np.isfinite(work / compute)
    }


#: The metrics whose sum is a point's processed tokens (the engine's per-role counters).
TOKEN_METRICS = ("compute/generator_tokens", "compute/trainer_tokens")


def point_work(step: float, metrics: Mapping[str, object] | None) -> tuple[float, float | None]:
    """(steps, tokens) of a stored point; tokens ``None`` unless every :data:`TOKEN_METRICS` is a number."""
    values = [(metrics or {}).get(k) for k in TOKEN_METRICS]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return float(step), float(sum(values))  # type: ignore[arg-type]
    return float(step), None


def spread(rates: Mapping[int, float]) -> float | None:
    """The largest work rate over the smallest (``None`` with fewer than two runs)."""
    if len(rates) < 2:
        return None
    return max(rates.values()) / min(rates.values())


def equal_work_confidence(
    verdict: GridVerdict,
    runner_up_fit: CurveFit,
    runner_up_budget: float,
    q: float,
    comparison: Comparison = "calibrated",
) -> float | None:
    """P(the best run's value at its budget > the runner-up's at ``q`` × its budget), the runner-up's draws from its
    fit (floored at its recent level), the best's the verdict's own; ``None`` without a best and a runner-up with
    draws, or without the runner-up's posterior."""
    best, second = verdict.best, verdict.runner_up
    if best is None or second is None or best not in verdict.draws:
        return None
    vb = value_draws(runner_up_fit, runner_up_budget * q, _EQUAL_WORK_SALT + second, comparison)
    if vb is None:
        return None
    va = np.maximum(verdict.draws[best], verdict.floors.get(best, -np.inf))
    # More compute never lowers the sigmoid: the runner-up's value at q × its budget is at least its value there.
    own = verdict.draws.get(second)
    vb = np.maximum(vb, verdict.floors.get(second, -np.inf))
    if own is not None:
        vb = np.maximum(vb, own)
    return p_higher(va, vb)
