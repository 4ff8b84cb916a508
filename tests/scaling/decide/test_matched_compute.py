"""The equal-compute comparison: pooled noise, no extrapolation, and the ``behind`` stop it gives ``decide_grid``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rl_core.scaling import GridRun, Policy, decide_grid
from rl_core.scaling.decide.matched_compute import behind_at_equal_compute, pooled_noise
from rl_core.scaling.measure.replay import load_grid, replay, scalerl_policy

ENGINE_GRIDS = Path(__file__).resolve().parents[2] / "fixtures" / "engine_grids"


def _line(slope: float, n: int, noise: float, seed: int, step: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=np.float64) * step
    return x, 0.2 + slope * x + rng.normal(0.0, noise, n)


def test_pooled_noise_recovers_the_evaluation_noise() -> None:
    curves = [_line(0.002, 40, 0.02, seed) for seed in range(6)]
    est = pooled_noise(curves)
    assert est is not None and 0.015 < est < 0.027


def test_pooled_noise_needs_enough_residuals() -> None:
    assert pooled_noise([_line(0.002, 4, 0.02, 0)]) is None


def test_no_verdict_where_the_comparator_has_not_been() -> None:
    """A sparse run is compared only where the other run has evaluations on both sides: never extrapolated."""
    x_short, y_short = np.array([0.0, 10.0, 20.0]), np.array([0.2, 0.9, 0.95])
    x_far, y_far = np.array([0.0, 40.0]), np.array([0.2, 0.3])
    curves = [(x_short, y_short), (x_far, y_far)]
    assert behind_at_equal_compute(curves, 1, [0], noise=0.01, margin=0.02, z=2.5) is None
    b = behind_at_equal_compute(curves, 0, [1], noise=0.01, margin=0.02, z=2.5)
    assert b is not None and b.gap < 0 and not b.is_behind  # run 0 is far ahead of run 1 at equal compute


def _grid_runs(budget: float) -> list[GridRun]:
    """Three dense runs (one clearly worse) and one sparse run far behind with only two evaluations."""
    out = []
    for i, slope in enumerate((0.004, 0.0041, 0.002)):
        x, y = _line(slope, 12, 0.01, i)
        out.append(GridRun(f"dense{i}", x, np.clip(y, 0, 1), "live", budget))
    out.append(GridRun("sparse", np.array([0.0, 50.0, 100.0]), np.array([0.2, 0.3, 0.35]), "live", budget))
    return out


def test_a_run_far_behind_at_equal_compute_is_stopped_before_it_can_be_fitted() -> None:
    recs = {r.run_id: r for r in decide_grid(_grid_runs(budget=400.0), Policy())}
    sparse = recs["sparse"]
    assert sparse.action == "stop" and sparse.rule == "behind", sparse
    assert sparse.numbers["gap_at_equal_compute"] > sparse.numbers["gap_threshold"]  # type: ignore[operator]
    assert f"{sparse.numbers['gap_at_equal_compute']:.3f}" in sparse.reason  # the reason shows the stored number
    # within noise of each other: never "behind" one another (successive halving may still rank them at a rung)
    assert recs["dense1"].rule != "behind" and recs["dense0"].rule != "behind"


def test_the_rule_can_be_turned_off() -> None:
    recs = {r.run_id: r for r in decide_grid(_grid_runs(budget=400.0), Policy(behind=None))}
    assert recs["sparse"].rule != "behind"


def test_near_replicates_are_never_called_behind() -> None:
    """Runs that differ only by evaluation noise (the same line, other seeds) are never stopped by this rule."""
    runs = [GridRun(f"rep{s}", *_line(0.003, 15, 0.02, s), "live", 300.0) for s in range(6)]  # type: ignore[misc]
    assert all(r.rule != "behind" for r in decide_grid(runs, Policy()))


def test_engine_generations_grid_stops_the_sparse_runs_early() -> None:
    """The real engine grid that motivated the rule: 12 and 16 generations per prompt cost three and four times the
    compute per step, so within the common budget those runs have few evaluations. The equal-compute rule (or the
    grid fit, which borrows its siblings' shape and noise) stops them, and the rule saves compute at no regret."""
    runs = load_grid(sorted((ENGINE_GRIDS / "generations").glob("*.csv")), "train_flops", "pass_rate")
    without = replay("off", runs, scalerl_policy(Policy(behind=None, rung=None)))
    with_rule = replay("on", runs, scalerl_policy(Policy(rung=None)))  # this rule alone, without the rungs
    stopped = {r.name: r.stopped_at / with_rule.budget for r in with_rule.runs if r.stopped_at is not None}
    assert stopped.get("gen12_s1", 1.0) < 0.5 and stopped.get("gen12_s0", 1.0) < 0.7, with_rule.to_dict()
    assert with_rule.compute < without.compute
    assert with_rule.regret <= without.regret + 1e-9


def test_a_stop_at_equal_compute_keeps_the_forecast_beside_it() -> None:
    """The page draws a stopped run from the numbers stored with its recommendation: a stop by an equal-compute
    rule must carry the forecast at the budget like any other (it was dropped, and the run vanished from the
    parallel-coordinates view)."""
    for rec in decide_grid(_grid_runs(budget=400.0), Policy()):
        if rec.rule in ("behind", "rung") and rec.numbers.get("A") is not None:
            assert rec.numbers.get("V_budget") is not None, rec
