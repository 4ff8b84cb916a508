"""Successive halving at equal compute: the rung standing, and the ``rung`` stop it gives ``decide_grid``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rl_core.scaling import Policy, decide_grid
from rl_core.scaling.decide.rungs import rung_fractions, standing
from rl_core.scaling.fit.forecast import CurveFit, fit_curve
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.replay import load_grid, replay, scalerl_policy
from tests.scaling.conftest import six_recipe_grid

ENGINE_GRIDS = Path(__file__).resolve().parents[2] / "fixtures" / "engine_grids"
X = np.linspace(0.0, 100.0, 11)


def _curve(level: float) -> tuple[np.ndarray, np.ndarray]:
    """A run that rises from 0.2 to ``level`` in its first evaluation and stays there."""
    y = np.full(X.size, level)
    y[0] = 0.2
    return X, y


def test_rungs_are_ashas() -> None:
    assert rung_fractions(3.0, 0.1) == pytest.approx([1 / 9, 1 / 3])
    assert rung_fractions(2.0, 0.1) == pytest.approx([1 / 8, 1 / 4, 1 / 2])
    assert rung_fractions(4.0, 0.1) == pytest.approx([1 / 4])


def test_only_the_top_third_of_the_recipes_go_on() -> None:
    curves = [_curve(v) for v in (0.8, 0.7, 0.6, 0.5, 0.4, 0.3)]
    recipes = [f"r{k}" for k in range(6)]
    at = [standing(curves, recipes, i, 900.0, 3.0, 0.1, 0.01) for i in range(6)]  # x reaches 100 = 1/9 of 900
    s = at[3]
    assert s is not None and s.rung == pytest.approx(1 / 9) and s.keep == 2 and s.recipes == 6
    assert s.above == 3 and s.outside
    assert at[0] is not None and not at[0].outside and at[1] is not None and not at[1].outside
    assert at[2] is not None and at[2].outside  # third of six: only 6 // 3 = 2 go on


def test_below_the_first_rung_or_alone_no_verdict() -> None:
    curves = [_curve(0.8), _curve(0.3)]
    assert standing(curves, ["a", "b"], 1, 10_000.0, 3.0, 0.1, 0.0) is None  # 100 < 1/9 of the budget
    assert standing(curves, ["a", "a"], 1, 300.0, 3.0, 0.1, 0.0) is None  # one recipe: nothing to rank


def test_within_the_margin_is_not_below() -> None:
    curves = [_curve(0.80), _curve(0.795)]
    s = standing(curves, ["a", "b"], 1, 300.0, 3.0, 0.1, 0.01)
    assert s is not None and s.above == 0 and not s.outside


def test_seeds_of_a_recipe_stand_together() -> None:
    """A recipe stands at the mean of its seeds at the rung; its own seeds never count against a run."""
    curves = [_curve(0.80), _curve(0.60), _curve(0.74)]
    recipes = ["a", "a", "b"]  # a: mean 0.70, below b's 0.74
    for i in (0, 1):
        s = standing(curves, recipes, i, 300.0, 3.0, 0.1, 0.01)
        assert s is not None and s.value == pytest.approx(0.70) and s.outside
    s = standing(curves, recipes, 2, 300.0, 3.0, 0.1, 0.01)
    assert s is not None and not s.outside


def test_a_run_is_valued_where_the_others_have_been_only() -> None:
    """A comparator that has not reached the rung is not at it (no extrapolation)."""
    short = (X[:3], np.array([0.2, 0.9, 0.9]))  # up to x = 20, the 1/3 rung of 300 is x = 100
    s = standing([_curve(0.5), short, _curve(0.45)], ["a", "b", "c"], 0, 300.0, 3.0, 0.1, 0.01)
    assert s is not None and s.rung == pytest.approx(1 / 3) and s.recipes == 2 and not s.outside


def _no_forecast(curves: Sequence[tuple[FloatArray, FloatArray]]) -> list[CurveFit]:
    fits = [fit_curve(x[:2], y[:2]) for x, y in curves]
    assert all(not f.usable for f in fits)
    return fits


def test_decide_grid_stops_the_bottom_recipes_at_the_rung() -> None:
    """Before the forecast can say anything (a fitter that sees two points: no fit), the rung stops the bottom four
    of six recipes once the stop has held on two evaluations; the reason shows the numbers stored beside it."""
    pol = Policy(behind=None)
    recs = {
        r.run_id: r for r in decide_grid(six_recipe_grid(5), pol, _no_forecast)
    }  # x up to 40: the rung at 30 held on two evaluations
    assert {k for k, r in recs.items() if r.action == "stop"} == {"run2", "run3", "run4", "run5"}, recs
    for k in ("run2", "run3", "run4", "run5"):
        r = recs[k]
        assert r.rule == "rung" and f"{r.numbers['value_at_rung']:.3f}" in r.reason, r
        n = r.numbers
        assert (n["recipes_at_rung"], n["recipes_kept"]) == (6, 2) and n["recipes_above"] is not None
        assert f"{n['recipes_above']:.0f} of the other 5 recipes" in r.reason and "top 2 of 6" in r.reason
    # x up to 30: the first evaluation at the rung
    first = {r.run_id: r for r in decide_grid(six_recipe_grid(4), pol, _no_forecast)}
    assert all(first[k].action == "continue" and first[k].rule == "pending" for k in ("run2", "run5")), first
    off = decide_grid(six_recipe_grid(5), Policy(behind=None, rung=None), _no_forecast)
    assert all(r.action != "stop" for r in off)


def test_engine_grids_the_rungs_save_compute_at_no_regret() -> None:
    """On the engine's recorded grids the rung rule, ranking recipes by rank alone (``seed_z`` off), uses less
    compute and picks as well as the rules without it. (With ``seed_z`` on, the default, the spread between the
    engine's two seeds per cell keeps most of these stops from firing: docs/decisions.md.)"""
    for name in ("lr", "loo"):
        runs = load_grid(sorted((ENGINE_GRIDS / name).glob("*.csv")), "train_flops", "pass_rate")
        off = replay("off", runs, scalerl_policy(Policy(rung=None, seed_z=float("inf"))))
        on = replay("on", runs, scalerl_policy(Policy(seed_z=float("inf"))))
        assert on.compute < off.compute - 0.03, (name, on.compute, off.compute)
        assert on.regret <= off.regret + 1e-9, (name, on.to_dict())
