"""The verdict's contrasts (any runs against a reference, as the best run against the runner-up) and the work-spread
helpers: one P(higher) on one set of draws."""

from __future__ import annotations

import numpy as np

from rl_core.scaling import GridRun
from rl_core.scaling.decide.grid_decisions import assess_grid
from rl_core.scaling.decide.grid_verdict import contrast, grid_verdict
from rl_core.scaling.decide.work_spread import MIN_POINTS, spread, work_rates
from rl_core.scaling.fit.model import sigmoid


def _run(name: str, status: str = "live") -> GridRun:
    x = np.linspace(100.0, 4000.0, 8)
    return GridRun(name, x, np.full(8, 0.3), status, 8000.0, name)  # type: ignore[arg-type]


def test_best_against_runner_up_is_one_contrast_and_seeds_are_averaged() -> None:
    rng = np.random.default_rng(0)
    draws = {0: rng.normal(0.60, 0.01, 1000), 1: rng.normal(0.55, 0.01, 1000), 2: rng.normal(0.57, 0.01, 1000)}
    stopped = {3: rng.normal(0.40, 0.01, 1000)}
    runs = [_run("a"), _run("b"), _run("c"), _run("d", "stopped")]
    v = grid_verdict(runs, draws, {}, frozenset(), frozenset(), lambda i, j: False, stopped)
    assert v.order == (0, 2, 1) and 3 not in v.order  # a stopped run is not ranked ...
    same = contrast(v, [v.best], [v.runner_up])  # type: ignore[list-item]
    assert same is not None and same.p_higher == v.confidence and same.difference == v.difference
    lost = contrast(v, [3], [0])  # ... but keeps its draws for a contrast
    assert lost is not None and lost.difference < -0.15 and lost.p_higher < 0.01 and lost.basis == "forecast"
    both = contrast(v, [1, 2], [0])  # a recipe's seeds: the mean of their draws
    assert both is not None and abs(both.difference - (0.56 - 0.60)) < 0.005
    assert contrast(v, [9], [0]) is None


def test_a_stopped_run_keeps_its_forecast_for_the_contrasts() -> None:
    x = np.linspace(200.0, 4000.0, 16)
    rng = np.random.default_rng(3)
    runs = [
        GridRun(name, x, sigmoid(x, 0.3, a, 1.8, 2500.0) + rng.normal(0, 0.004, x.size), status, 8000.0, name)
        for name, a, status in (("base", 0.66, "live"), ("loo", 0.55, "stopped"))
    ]
    v = assess_grid(runs).verdict
    assert v.order == (0,) and 1 in v.draws
    c = contrast(v, [1], [0])
    assert c is not None and c.difference < -0.05 and c.p_higher < 0.05


def test_work_rates_count_runs_with_enough_points_and_the_spread_is_max_over_min() -> None:
    latest = {1: (1500.0, 1000.0, MIN_POINTS), 2: (1000.0, 1000.0, 10), 3: (90.0, 10.0, MIN_POINTS - 1), 4: (0, 0, 9)}
    rates = work_rates(latest)
    assert rates == {1: 1.5, 2: 1.0}
    assert spread(rates) == 1.5 and spread({1: 2.0}) is None
