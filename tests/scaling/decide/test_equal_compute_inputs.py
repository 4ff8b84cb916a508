"""The equal-compute rules (*behind*, *rung*) read one typed object, :class:`EqualComputeInputs`, and near-best stops
are counted by the rule that made them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rl_core.scaling import GridRun, Policy
from rl_core.scaling.decide.equal_compute_stops import EqualComputeInputs, behind_candidates, rung_candidates
from rl_core.scaling.decide.matched_compute import pooled_noise
from rl_core.scaling.decide.recommend import Recommendation
from rl_core.scaling.fit.forecast import CurveFit, fit_curve
from rl_core.scaling.measure.frontier import near_best_stopped, score, stop_rule
from rl_core.scaling.measure.replay import RunCurve, replay
from tests.scaling.conftest import six_recipe_grid


def _inputs(runs: Sequence[GridRun], policy: Policy, taken: frozenset[int] = frozenset()) -> EqualComputeInputs:
    fits: list[CurveFit] = [fit_curve(r.x[:2], r.y[:2]) for r in runs]  # too few points: no forecast
    own = [Recommendation(r.run_id, "continue", "", {}) for r in runs]
    noise = pooled_noise([(r.x, r.y) for r in runs])
    return EqualComputeInputs(runs, fits, {}, [], frozenset({0}), own, taken, policy, noise)


def test_both_rules_read_one_object_and_skip_the_runs_taken() -> None:
    runs = six_recipe_grid(5)
    rung_only = Policy(behind=None)
    stops = {i for _, i, _ in rung_candidates(_inputs(runs, rung_only))}
    assert stops == {2, 3, 4, 5}  # outside the top 2 of 6 at the 1/9 rung; run0 is protected
    left = {i for _, i, _ in rung_candidates(_inputs(runs, rung_only, frozenset({2, 3})))}
    assert left == {4, 5}
    behind_only = Policy(rung=None)
    behind = behind_candidates(_inputs(runs, behind_only))
    assert {i for _, i, _ in behind} >= {4, 5}
    assert not behind_candidates(_inputs(runs, behind_only, frozenset(range(6))))
    assert not rung_candidates(_inputs(runs, Policy(rung=None)))


def test_with_taken_adds_the_candidates_runs() -> None:
    inputs = _inputs(six_recipe_grid(5), Policy())
    rec = Recommendation("run3", "stop", "x", {}, "rung")
    assert inputs.with_taken([(0.5, 3, rec)]).taken == frozenset({3})
    assert inputs.taken == frozenset()  # frozen: the original is unchanged


def test_near_best_stops_are_counted_by_rule() -> None:
    x = np.arange(10, dtype=np.float64) * 10.0
    runs = [
        RunCurve("best", x, np.full(10, 0.70)),
        RunCurve("twin", x, np.full(10, 0.70)),
        RunCurve("worse", x, np.full(10, 0.40)),
        RunCurve("late", x, np.full(10, 0.695)),
    ]
    reasons = {
        "twin": "successive halving: at 11% of the budget ...",
        "worse": "dominated: ...",
        "late": "compute target 0.3: ...",
    }

    def policy(runs_: object, budget: float) -> object:
        return lambda view: reasons if view.x_now == 20.0 else {}

    r = replay("t", runs, policy, 90.0)  # type: ignore[arg-type]
    assert sorted(near_best_stopped(r, runs)) == [("late", "compute_target"), ("twin", "rung")]
    assert dict(score("g", r, runs).near_best_rules) == {"rung": 1, "compute_target": 1}
    assert stop_rule("optuna asha: pruned at step 3 (value 0.1)") == "pruner"
    assert stop_rule("behind at equal compute: 0.05 below b") == "behind"
    assert stop_rule(None) == "other"
