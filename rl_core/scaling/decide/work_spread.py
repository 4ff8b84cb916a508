"""Runs that got different work for the same compute: the verdict's check on the steps each run got per unit.

A run's compute is what its trainer reports (device-hours, GPU-hours, tokens...). Where compute is time, another
program on the machine inflates it: a run under contention gets fewer optimizer steps for the same compute, and
then its curve against compute is lower for a reason that has nothing to do with its recipe. The rule:

- each run's *work rate* is the step of its latest stored point over that point's compute (runs with fewer than
  :data:`MIN_POINTS` points, or no positive step and compute, are left out);
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
    """Steps per compute unit of each run with enough points, from ``latest``: run key → (step, compute, points)
    of its latest stored point."""
    return {
        k: float(step) / float(compute)
        for k, (step, compute, points) in latest.items()
        if points >= MIN_POINTS and step > 0 and compute > 0 and np.isfinite(step / compute)
    }


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
