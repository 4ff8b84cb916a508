"""A run that has fallen from its peak is forecast at its recent level, not at the peak its sigmoid remembers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rl_core.scaling import GridRun, Policy, decide_grid
from rl_core.scaling.decide.fallen import capped_at_recent, fallen_from_peak
from rl_core.scaling.decide.policy import FallRule
from rl_core.scaling.measure.replay import cached_fitter, load_grid, replay, scalerl_policy

NUMINA_DAPO = Path(__file__).resolve().parents[2] / "fixtures/public_grids/speed_rl_math500/1p5b_numina_dapo"


def _rise_then_fall(n: int = 40, peak_at: int = 15, drop: float = 0.12, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = np.arange(n, dtype=np.float64)
    rise = 0.3 + 0.4 * (1 - np.exp(-k / 4))
    fall = np.clip((k - peak_at) / (n - peak_at), 0, 1) * drop
    return rise - fall + rng.normal(0, 0.01, n)


def test_a_rise_then_fall_is_detected_and_a_noisy_plateau_is_not() -> None:
    fell = fallen_from_peak(_rise_then_fall(), noise=0.01, points=3, rule=FallRule(z=2.5, margin=0.02))
    assert fell is not None and fell.drop > fell.threshold and fell.recent < fell.peak
    rng = np.random.default_rng(1)
    plateau = 0.6 + rng.normal(0, 0.01, 60)
    assert fallen_from_peak(plateau, noise=0.01, points=3, rule=FallRule(z=2.5, margin=0.02)) is None


@pytest.mark.parametrize("noise", [None, 0.01])
def test_no_verdict_without_noise_or_points(noise: float | None) -> None:
    short = np.array([0.2, 0.7, 0.3, 0.3, 0.3])  # fewer than 2 × 3 evaluations
    assert fallen_from_peak(short, noise=noise, points=3, rule=FallRule(z=2.5, margin=0.02)) is None
    assert fallen_from_peak(_rise_then_fall(), noise=0.01, points=3, rule=None) is None


def test_capping_lowers_draws_to_the_recent_level_only() -> None:
    y = _rise_then_fall()
    fell = fallen_from_peak(y, noise=0.01, points=3, rule=FallRule(z=2.5, margin=0.02))
    v = np.array([0.5, 0.6, 0.7, 0.8])
    capped = capped_at_recent(v, fell)
    assert fell is not None and np.all(capped <= v) and capped.max() == pytest.approx(fell.recent)
    assert capped_at_recent(v, None) is v


def _collapsing_leader_and_stopped_run() -> list[GridRun]:
    """SPEED-RL on MATH500 (1.5B, Numina, DAPO) as the grid stood at 61% of the budget: the fast recipe rose to
    ~0.70 by a quarter of the budget and has fallen to ~0.60; the plain run was stopped at 17%, still rising."""
    runs = {r.name: r for r in load_grid(sorted(NUMINA_DAPO.glob("*.csv")), "time_s", "pass_rate")}
    fast, plain = runs["1.5B-Math-FAST-DAPO-NuminaMath-N4+20"], runs["1.5B-Math-DAPO-NuminaMath-N24"]
    budget = float(min(fast.x[-1], plain.x[-1]))
    now, stop = 0.61 * budget, 0.17 * budget
    f, p = fast.x <= now, plain.x <= stop
    return [
        GridRun("leader", fast.x[f], fast.y[f], "live", budget),
        GridRun("slow", plain.x[p], plain.y[p], "stopped", budget, stop_rule="behind"),
    ]


def test_a_fallen_leader_no_longer_keeps_a_better_run_stopped() -> None:
    grid = _collapsing_leader_and_stopped_run()
    fit = cached_fitter()  # the runs fitted as one grid, as the service fits an experiment
    on = {r.run_id: r for r in decide_grid(grid, Policy(), fit)}
    off = {r.run_id: r for r in decide_grid(grid, Policy(fall=None), fit)}
    assert off["slow"].action != "resume"  # the sigmoid still forecasts the leader near its peak
    assert on["slow"].action in ("resume", "continue") and on["slow"].rule in ("resume", "resume_pending")
    leader = on["leader"].numbers
    assert leader["fall_from_peak"] is not None and leader["fall_from_peak"] > 0.05
    assert leader["V_budget"] is not None and leader["V_budget"] <= float(np.mean(grid[0].y[-3:])) + 1e-12


def _equal_compute_rules_only(**settings: Any) -> Policy:
    """No forecast stop, only the equal-compute rules: ``p_stop`` above 1 (no probability reaches it). A policy
    refuses that value (it is no probability), so it is set past the validation, for this test only."""
    policy = Policy(min_expected_gain=0.0, **settings)
    object.__setattr__(policy, "p_stop", 1.01)
    return policy


def test_a_fallen_run_is_no_comparator_at_equal_compute() -> None:
    """The slow run trails the leader at equal compute, but the leader has since fallen below it."""
    grid = _collapsing_leader_and_stopped_run()
    live = [grid[0], replace(grid[1], status="live", stop_rule=None)]
    fit = cached_fitter()
    on = {r.run_id: r for r in decide_grid(live, _equal_compute_rules_only(), fit)}
    off = {r.run_id: r for r in decide_grid(live, _equal_compute_rules_only(fall=None), fit)}
    assert off["slow"].rule in ("behind", "rung", "pending")
    assert on["slow"].rule not in ("behind", "rung", "pending")


def test_speed_rl_collapse_is_not_bet_on_any_more() -> None:
    """SPEED-RL on MATH500, 1.5B Numina DAPO: the fast recipe leads, then decays from 0.70 to 0.60; the plain run,
    stopped early, ends at 0.70. Until the fall rule it was never resumed (regret 0.101)."""
    runs = load_grid(sorted(NUMINA_DAPO.glob("*.csv")), "time_s", "pass_rate")
    blind = replay("scalerl", runs, scalerl_policy(Policy(fall=None)))
    now = replay("scalerl", runs, scalerl_policy(Policy()))
    assert blind.regret > 0.1
    assert now.regret == 0.0 and now.pick == "1.5B-Math-DAPO-NuminaMath-N24"
