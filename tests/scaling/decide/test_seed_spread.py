"""Seeds of one recipe at equal compute: the spread between them (``seed_z``) widens the equal-compute rules, and the
replay's regret by recipe says whether the recipe a policy leaves standing is the best one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rl_core.scaling import GridRun, Policy, decide_grid
from rl_core.scaling.decide.matched_compute import behind_at_equal_compute, seed_spread
from rl_core.scaling.decide.rungs import standing
from rl_core.scaling.fit.forecast import CurveFit, fit_curve
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.replay import load_grid, recipe_regret, replay, scalerl_policy

OLMO = Path(__file__).resolve().parents[2] / "fixtures" / "public_grids" / "cs336_olmo_gsm8k"
X = np.arange(0.0, 101.0, 10.0)


def _flat(*levels: float) -> tuple[FloatArray, FloatArray]:
    return X[: len(levels)], np.array(levels, dtype=np.float64)


def test_seed_spread_pools_the_spread_between_seeds_of_each_recipe() -> None:
    curves = [_flat(0.1, 0.5), _flat(0.1, 0.6), _flat(0.1, 0.7), _flat(0.1, 0.2), _flat(0.1, 0.4), _flat(0.1, 0.9)]
    recipes = ["a", "a", "a", "b", "b", None]  # the last run has no recipe: not a seed of anything
    # sum of squares within a: 0.02, within b: 0.02; degrees of freedom 2 + 1
    assert seed_spread(curves, recipes, 10.0) == pytest.approx(np.sqrt(0.04 / 3))
    assert seed_spread(curves, recipes, 0.0) == pytest.approx(0.0)


def test_no_seed_spread_without_two_seeds_that_have_been_there() -> None:
    curves = [_flat(0.1, 0.5, 0.6), _flat(0.1, 0.6), _flat(0.1, 0.3, 0.4)]
    assert seed_spread(curves, ["a", "a", "b"], 20.0) is None  # a's second seed has not reached 20
    assert seed_spread(curves, ["a", "b", "c"], 10.0) is None  # no recipe with two seeds
    assert seed_spread(curves, [None, None, None], 10.0) is None


def test_the_gap_must_clear_the_seed_spread_when_it_is_larger_than_the_noise() -> None:
    curves = [_flat(0.0, 0.0, 0.02), _flat(0.0, 0.1, 0.3)]
    b = behind_at_equal_compute(curves, 0, [1], noise=0.01, margin=0.02, z=2.5)
    assert b is not None and b.is_behind and b.seed_spread is None
    wide = behind_at_equal_compute(curves, 0, [1], noise=0.01, margin=0.02, z=2.5, seeds=0.1, seed_z=2.5)
    assert wide is not None and not wide.is_behind and wide.seed_spread == 0.1
    assert wide.threshold == pytest.approx(0.02 + 2.5 * 0.1 * np.sqrt(2.0))
    narrow = behind_at_equal_compute(curves, 0, [1], noise=0.01, margin=0.02, z=2.5, seeds=0.001, seed_z=2.5)
    assert narrow is not None and narrow.is_behind and narrow.seed_spread is None  # the noise sets the threshold


def test_the_rung_margin_widens_with_the_seed_spread() -> None:
    """Three recipes of two seeds at the 1/9 rung: recipe c trails a by 0.05 on average, but a's own seeds are
    0.1 apart, so the gap is within what the seeds alone give."""
    curves = [_flat(0.0, 0.45), _flat(0.0, 0.55), _flat(0.0, 0.44), _flat(0.0, 0.46), _flat(0.0, 0.40), _flat(0.0, 0.5)]
    recipes = ["a", "a", "b", "b", "c", "c"]
    ranked = standing(curves, recipes, 4, 90.0, 3.0, 0.1, 0.01)
    assert ranked is not None and ranked.outside and ranked.seed_spread is None  # by rank alone: below the top 1
    seeded = standing(curves, recipes, 4, 90.0, 3.0, 0.1, 0.01, seed_z=2.5)
    assert seeded is not None and seeded.seed_spread is not None and seeded.above == 0 and not seeded.outside


def _onset(delay: float, seed: int) -> tuple[FloatArray, FloatArray]:
    """A run that stays at 0 until ``delay`` and then rises to 0.5 (a base model that must learn the answer format
    first), with small evaluation noise."""
    rng = np.random.default_rng(seed)
    x = np.arange(0.0, 41.0, 5.0)
    y = 0.5 / (1.0 + np.exp(-(x - delay - 20.0) / 5.0)) + rng.normal(0.0, 0.004, x.size)
    return x, np.clip(y, 0.0, 1.0)


def _no_forecast(curves: Sequence[tuple[FloatArray, FloatArray]]) -> list[CurveFit]:
    return [fit_curve(x[:2], y[:2]) for x, y in curves]


def test_a_run_is_not_stopped_for_a_seed_of_another_recipe_that_took_off_first() -> None:
    """Two recipes that are the same but for when their seeds take off: at x = 40 one seed of recipe a is nearly up,
    the others are rising or still at 0. By the evaluation noise alone the late seeds are far behind it; by the
    spread between seeds, none is."""
    delays = {"a_s0": 0.0, "a_s1": 25.0, "b_s0": 20.0, "b_s1": 30.0}
    runs = [GridRun(n, *_onset(d, k), "live", 400.0, config=n[0]) for k, (n, d) in enumerate(delays.items())]
    seeded = {r.run_id: r for r in decide_grid(runs, Policy(rung=None), _no_forecast)}
    assert all(r.rule != "behind" for r in seeded.values()), seeded
    blind = {r.run_id: r for r in decide_grid(runs, Policy(rung=None, seed_z=float("inf")), _no_forecast)}
    assert blind["b_s0"].rule == "behind" and blind["b_s1"].rule == "behind", blind
    assert blind["b_s1"].action == "stop" and "noise" in blind["b_s1"].reason


def test_recipe_regret_asks_whether_the_recipe_left_standing_is_the_best() -> None:
    finals = {"good_s0": 0.50, "good_s1": 0.48, "risky_s0": 0.53, "risky_s1": 0.05}
    everything = dict(finals)
    assert recipe_regret(finals, everything, finals) == pytest.approx(0.0)  # never stop: the best recipe by mean
    # the collapsed seed stopped at its level 0.05, the good recipe stopped early at 0.3: risky still stands lower
    seen = {**finals, "good_s0": 0.3, "good_s1": 0.3}
    assert recipe_regret(finals, seen, ["risky_s0"]) == pytest.approx(0.49 - 0.29)
    assert recipe_regret({"a": 0.5, "b": 0.4}, {"a": 0.5, "b": 0.4}, ["a"]) is None  # no seeds: per-run regret only


def test_the_olmo_loss_grid_no_longer_stops_recipes_for_a_lucky_seed() -> None:
    """The held-out study where the equal-compute rules ranked seeds: at step 40, 13 of 20 runs were stopped behind
    the one seed that had left 0. With the seed spread the recipe left standing is within 0.01 of the best."""
    members = json.loads((OLMO / "ablations.json").read_text())["loss"]  # the order bench/replay.py replays
    runs = load_grid([OLMO / m for m in members], "step", "pass_rate")
    blind = replay("blind", runs, scalerl_policy(Policy(seed_z=float("inf"))))
    seeded = replay("seeded", runs, scalerl_policy(Policy()))
    at_40 = [r for r in blind.runs if r.stopped_at == 40.0 and r.reason and r.reason.startswith("behind")]
    assert len(at_40) >= 10, blind.to_dict()
    assert seeded.recipe_regret is not None and seeded.recipe_regret <= 0.01 and seeded.regret <= 0.005
    assert blind.recipe_regret is not None and blind.recipe_regret > 0.02 and blind.regret > 0.02
