"""What a frontier says about the knob (rl_core.scaling.measure.frontier_report) and its text
(scalerl.cli.replay_frontier), on hand-made grid scores; the oracle floor (frontier.grid_floors) on a hand-made grid."""

from __future__ import annotations

import numpy as np
import pytest

from rl_core.scaling.measure.frontier import FLOOR_STARTS, GridScore, Setting, grid_floors, points
from rl_core.scaling.measure.frontier_report import (
    DEFAULT_TARGET,
    FloorGap,
    floor_gaps,
    knob_target,
    match_pruners,
    monotonicity,
    nearest_floor,
)
from rl_core.scaling.measure.replay import RunCurve
from scalerl.cli.replay_frontier import floor_goal_lines, match_lines, monotone_lines

DEFAULT = Setting("scalerl", "default")
LOW, HIGH = Setting("scalerl", "target 0.3"), Setting("scalerl", "target 0.8")
ASHA = Setting("optuna-asha", "rf 2, min 0.037")


def _g(grid: str, compute: float, regret: float) -> GridScore:
    return GridScore(grid, compute, regret, regret, 0)


def _table(scalerl: dict[Setting, list[tuple[float, float]]]) -> dict[Setting, list[GridScore]]:
    """Each setting's (compute, regret) on grids a, b, ... in order."""
    return {s: [_g("ab"[k], c, r) for k, (c, r) in enumerate(v)] for s, v in scalerl.items()}


def test_the_knob_sits_by_target_with_the_default_at_one_half() -> None:
    assert knob_target(DEFAULT) == DEFAULT_TARGET == 0.5
    assert knob_target(LOW) == 0.3 and knob_target(Setting("scalerl", "target 1")) == 1.0
    assert knob_target(ASHA) is None


def test_a_knob_whose_compute_rises_and_regret_falls_with_the_target_passes() -> None:
    table = _table(
        {
            HIGH: [(0.8, 0.001), (0.9, 0.0)],  # out of order on purpose: ordered by target, not by the table
            LOW: [(0.3, 0.01), (0.4, 0.02)],
            DEFAULT: [(0.5, 0.01), (0.5, 0.01)],  # regret equal to target 0.3's on grid a: not a rise
        }
    )
    table[ASHA] = [_g("a", 0.1, 0.5), _g("b", 0.1, 0.5)]  # a pruner is not on the knob
    m = monotonicity(table, lambda g: True)
    assert m.passed and m.violations == [] and m.grids == 2 and dict(m.failing) == {}
    assert monotone_lines(m) == ["monotone: PASS", "per grid: not monotone on 0 of 2 grids"]


def test_a_knob_whose_regret_rises_with_the_target_fails_and_names_the_pair() -> None:
    table = _table(
        {
            LOW: [(0.3, 0.002), (0.3, 0.002)],
            DEFAULT: [(0.5, 0.002), (0.5, 0.004)],  # mean regret 0.003 > 0.002: a rise from 0.3 to the default
            HIGH: [(0.4, 0.0), (0.8, 0.0)],  # mean compute 0.6 > 0.5, but on grid a it falls from 0.5 to 0.4
        }
    )
    m = monotonicity(table, lambda g: True)
    assert not m.passed
    [v] = m.violations
    assert (v.metric, v.lower.label, v.higher.label) == ("regret", "target 0.3", "default")
    assert v.lower.regret == pytest.approx(0.002) and v.higher.regret == pytest.approx(0.003)
    # per grid: a's compute falls from the default to 0.8; b's regret rises from 0.3 to the default
    assert {g: [(x.metric, x.lower.label, x.higher.label) for x in vs] for g, vs in m.failing.items()} == {
        "a": [("compute", "default", "target 0.8")],
        "b": [("regret", "target 0.3", "default")],
    }
    head, grids = monotone_lines(m)
    assert head.startswith("monotone: FAIL (regret rises from target 0.3 (0.00200) to default (0.00300)")
    assert grids == "per grid: not monotone on 2 of 2 grids: a (1 pair), b (1 pair)"
    # one grid alone: only a's pair
    only_a = monotonicity(table, lambda g: g == "a")
    assert [(v.metric, v.lower.label, v.higher.label) for v in only_a.violations] == [
        ("compute", "default", "target 0.8")
    ]
    assert only_a.grids == 1 and list(only_a.failing) == ["a"]


def test_only_floating_point_noise_is_forgiven() -> None:
    noise = _table({LOW: [(0.3, 0.002)], DEFAULT: [(0.3 - 1e-12, 0.002 + 1e-12)]})
    assert monotonicity(noise, lambda g: True).passed
    real = _table({LOW: [(0.3, 0.002)], DEFAULT: [(0.3 - 1e-6, 0.002 + 1e-6)]})
    assert [v.metric for v in monotonicity(real, lambda g: True).violations] == ["compute", "regret"]


def test_a_pruner_setting_is_matched_by_a_knob_point_at_no_more_compute_and_no_more_regret() -> None:
    table = _table({LOW: [(0.3, 0.010)], DEFAULT: [(0.5, 0.003)], HIGH: [(0.8, 0.001)]})
    median = Setting("optuna-median", "warmup 0.5", "sequential")
    table[ASHA] = [_g("a", 0.5, 0.003)]  # ties the default on both: matched
    table[median] = [_g("a", 0.7, 0.002)]  # the default has more regret, target 0.8 more compute: lost
    hb = Setting("optuna-hyperband", "rf 2, min 0.037")
    table[hb] = [_g("a", 0.2, 0.0)]  # cheaper than every knob point, and no knob point has regret 0: lost
    pts = points(table, lambda g: True)
    ours = [p for p in pts if p.setting.policy == "scalerl"]
    matches = match_pruners(ours, [p for p in pts if p.setting.policy != "scalerl"])
    by = {m.pruner.setting: m for m in matches}
    matched = by[ASHA]
    assert matched.met and matched.by_compute is not None and matched.by_compute.setting == DEFAULT
    lost = by[median]
    assert not lost.met
    assert lost.by_compute is not None and lost.by_compute.setting == DEFAULT  # least regret at no more compute
    assert lost.by_regret is not None and lost.by_regret.setting == HIGH  # least compute at no more regret
    assert not by[hb].met and by[hb].by_compute is None and by[hb].by_regret is None
    lines = match_lines(matches)
    assert lines[0].endswith("matched 1 of 3")
    assert "optuna-asha rf 2, min 0.037 (parallel) 0.500 / 0.0030: matched by default (0.500 / 0.0030)" in lines[1]
    assert "LOST" in lines[2] and "default (0.500 / 0.0030)" in lines[2] and "target 0.8 (0.800 / 0.0010)" in lines[2]
    assert "none (every knob point spends more)" in lines[3]
    assert lines[-1] == (
        "lost: optuna-median warmup 0.5 (sequential) 0.700 / 0.0020; optuna-hyperband rf 2, min 0.037 (parallel) "
        "0.200 / 0.0000"
    )


def test_the_distance_to_the_floor_is_mean_compute_minus_the_mean_floor_of_the_same_grids() -> None:
    table = _table({LOW: [(0.3, 0.006), (0.5, 0.006)], DEFAULT: [(0.5, 0.002), (0.7, 0.004)]})
    table[HIGH] = [_g("a", 0.9, 0.0)]  # replayed on grid a only: its floor is a's
    floors = {"a": 0.2, "b": 0.4}
    gaps = floor_gaps(table, lambda g: True, floors)
    assert [(g.target, g.point.setting.label) for g in gaps] == [
        (0.3, "target 0.3"),
        (0.5, "default"),
        (0.8, "target 0.8"),
    ]
    low, default, high = gaps
    assert low.floor == pytest.approx(0.3) and low.gap == pytest.approx(0.4 - 0.3)
    assert default.floor == pytest.approx(0.3) and default.gap == pytest.approx(0.6 - 0.3)
    assert high.floor == pytest.approx(0.2) and high.gap == pytest.approx(0.9 - 0.2)
    assert default.point.regret == pytest.approx(0.003) and default.point.regret_worst == pytest.approx(0.004)
    # the goals: target 0.3 is 0.1 above the floor, but its mean regret 0.006 is above 0.005; the default
    # (0.3 above, 0.003) is the nearest at regret <= 0.005 and is not within 0.10
    assert nearest_floor(gaps, 0.005) is default
    some, dflt = floor_goal_lines(gaps, (0.10, 0.005), (0.15, 0.003))
    assert some.startswith(
        "some setting within 0.10 of the floor at mean regret ≤ 0.005: NOT MET (best: default: 0.300"
    )
    assert dflt.startswith("default within 0.15 of the floor at regret ≤ 0.003: NOT MET (default: 0.300 above")
    # looser goals are met: the default is 0.3 above the floor (0.30 within noise) at regret 0.003
    some, dflt = floor_goal_lines(gaps, (0.30, 0.005), (0.30, 0.003))
    assert " MET (best: default" in some and " MET (default" in dflt and "NOT" not in some + dflt
    with pytest.raises(KeyError):
        floor_gaps(table, lambda g: True, {"a": 0.2})
    assert nearest_floor([FloorGap(0.3, low.point, 0.3)], 0.005) is None
    assert "(best: no setting has mean regret ≤ 0.005)" in floor_goal_lines([low], (0.10, 0.005), (0.15, 0.003))[0]


def test_the_floor_of_a_hand_made_grid() -> None:
    x = np.array([0.0, 10.0, 30.0, 50.0, 100.0])
    runs = [RunCurve(f"r{k}", x, np.linspace(0.1, 0.4 + 0.1 * k, x.size)) for k in range(3)]
    floors = grid_floors(runs)
    assert list(floors) == list(FLOOR_STARTS)
    # one run to the budget (100), two stopped at the first evaluation from the start: 10 for 0, 1/27 (3.7) and
    # 1/9 (11.1 -> 30), 50 for 1/3 (33.3)
    assert floors[0.0] == pytest.approx((100 + 2 * 10) / 300)
    assert floors[1 / 27] == pytest.approx((100 + 2 * 10) / 300)
    assert floors[1 / 9] == pytest.approx((100 + 2 * 30) / 300)
    assert floors[1 / 3] == pytest.approx((100 + 2 * 50) / 300)
    assert grid_floors(runs, [0.0], budget=50.0) == {0.0: pytest.approx((50 + 2 * 10) / 150)}
