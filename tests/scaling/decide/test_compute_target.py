"""The one knob (``Policy.compute_target``): its schedule, the stops it adds, the frontier it traces, and the
surfaces that set it (grid document, ``scalerl replay``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from rl_core.scaling import GridRun, Policy, decide_grid
from rl_core.scaling.decide.compute_target import (
    LOW_KEEP_P,
    LOW_START,
    effective_policy,
    hold_back,
    level,
    schedule_compute,
    schedule_exponent,
    stop_times,
    survivors,
)
from rl_core.scaling.measure.frontier import (
    FLOOR_STARTS,
    GridScore,
    Setting,
    at_compute,
    near_best_stops,
    oracle_floor,
    points,
)
from rl_core.scaling.measure.frontier_report import match_pruners
from rl_core.scaling.measure.replay import RunCurve, replay, scalerl_policy
from scalerl.cli.main import cli
from scalerl.cli.replay_frontier import floor_line
from server.lifecycle.grid import parse_policy


def saturating(name: str, ceiling: float, n: int = 30, rate: float = 0.12, seed: int = 0) -> RunCurve:
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=np.float64) * 10.0
    y = 0.1 + (ceiling - 0.1) * (1 - np.exp(-rate * np.arange(n))) + rng.normal(0, 0.004, n)
    y[0] = 0.1
    return RunCurve(name, x, np.clip(y, 0, 1))


def grid(*ceilings: float) -> list[RunCurve]:
    return [saturating(f"r{i}_{c:.2f}", c, seed=i) for i, c in enumerate(ceilings)]


@pytest.mark.parametrize("n", [2, 3, 5, 11, 56])
def test_schedule_spends_the_target_where_it_can(n: int) -> None:
    s0 = 0.1
    floor = (1 + (n - 1) * s0) / n  # every run but the top one stopped at s0
    for target in (0.9, 0.7, 0.5, 0.3, 0.2):
        a = schedule_exponent(target, s0, n)
        spent = schedule_compute(n, a, s0)
        assert spent == pytest.approx(max(target, floor), abs=2e-3)
        times = stop_times(n, a, s0)
        assert times[0] == 1.0 and all(s0 <= t <= 1.0 for t in times)
        assert times == sorted(times, reverse=True)  # lower ranks stop first


def test_survivors_shrink_with_compute_and_with_a_lower_target() -> None:
    n, s0 = 12, 0.1
    assert survivors(n, 0.5, 1.0, s0) == n and survivors(n, 0.05, 0.3, s0) == n
    for target in (0.7, 0.4, 0.2):
        kept = [survivors(n, s, target, s0) for s in np.linspace(0.1, 1.0, 30)]
        assert kept == sorted(kept, reverse=True) and min(kept) >= 1
    for s in np.linspace(0.11, 1.0, 20):
        assert survivors(n, s, 0.2, s0) <= survivors(n, s, 0.4, s0) <= survivors(n, s, 0.7, s0)


def _grid_runs(runs: list[RunCurve], k: int) -> list[GridRun]:
    budget = float(runs[0].x[-1])
    return [GridRun(r.name, r.x[:k], r.y[:k], "live", budget) for r in runs]


def test_a_target_stops_the_lower_ranked_runs_and_never_the_leader() -> None:
    runs = grid(0.72, 0.70, 0.68, 0.66, 0.64, 0.62)  # close enough that the other rules stop nothing yet
    at = _grid_runs(runs, 12)  # 38% of the budget
    off = decide_grid(at, Policy())
    on = decide_grid(at, Policy(compute_target=0.3, target_start=0.1, target_keep_p=1.0))  # the bare schedule
    assert not any(r.rule == "compute_target" for r in off)
    stopped = [i for i, r in enumerate(on) if r.rule == "compute_target"]
    assert stopped, [r.reason for r in on]
    leader = next(i for i, r in enumerate(on) if r.rule == "leader")
    assert leader not in stopped and on[leader].action != "stop"
    # a run it stops ranks outside the share the schedule keeps at its compute
    assert all((on[i].numbers["target_rank"] or 0) > (on[i].numbers["target_keep"] or 0) for i in stopped)
    assert all("compute target 0.3" in on[i].reason for i in stopped)


def test_a_lower_target_spends_less_in_a_replay_and_keeps_the_clear_best() -> None:
    runs = grid(0.75, 0.74, 0.73, 0.72, 0.71, 0.70, 0.69, 0.68)  # close: the rules alone run most of them long
    spent = {}
    for target in (None, 0.5, 0.25, 0.1):
        r = replay("scalerl", runs, scalerl_policy(Policy(compute_target=target)))
        spent[target] = r.compute
        assert r.pick == runs[0].name and r.regret == 0.0
        if target is None:
            assert not any(o.reason and o.reason.startswith("compute target") for o in r.runs)
    assert spent[0.1] < spent[0.25] < spent[0.5] == spent[None]  # 0.5 is the rules alone
    assert spent[0.25] < 0.4


def test_the_knob_is_the_rules_at_one_half_holds_back_above_and_cuts_below() -> None:
    assert effective_policy(Policy()) == Policy()
    assert effective_policy(Policy(compute_target=0.5)) == Policy()
    high = effective_policy(Policy(compute_target=0.9))
    assert high.compute_target == 0.9 and high.min_fraction == Policy().min_fraction  # the rungs stay
    assert hold_back(high) == pytest.approx((level(0.9) - 0.44) / 0.6)
    assert high.value_margin > Policy().value_margin and high.min_expected_gain < Policy().min_expected_gain
    top = effective_policy(Policy(compute_target=1.0))
    assert hold_back(top) < 0.95 and top.min_expected_gain == 0.0  # at 1 no run "cannot matter"
    assert hold_back(effective_policy(Policy(compute_target=0.6, min_fraction=0.5))) == 0.5  # never below its own
    assert effective_policy(Policy(compute_target=0.7, rung=None)).rung is None  # a rule that is off stays off
    targets = [0.55, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0]
    levels = [level(t) for t in targets]
    assert levels == sorted(levels) and len(set(levels)) == len(levels) and levels[-1] == 1.0
    low = effective_policy(Policy(compute_target=0.3))
    assert (low.compute_target, low.target_keep_p, low.target_start) == (0.3, LOW_KEEP_P, LOW_START)
    mine = effective_policy(Policy(compute_target=0.3, target_keep_p=0.5, target_start=0.2))
    assert (mine.target_keep_p, mine.target_start) == (0.5, 0.2)  # set explicitly: kept


def test_a_high_target_spends_more_and_stops_later() -> None:
    runs = grid(0.75, 0.74, 0.73, 0.72, 0.71, 0.70, 0.69, 0.68)
    spent = {}
    for target in (None, 0.7, 0.9):
        r = replay("scalerl", runs, scalerl_policy(Policy(compute_target=target)))
        spent[target] = r.compute
        stops = [float(o.stopped_at) / r.budget for o in r.runs if o.stopped_at is not None]
        if target is not None:
            assert all(s >= (level(target) - 0.44) / 0.6 - 1e-9 for s in stops), stops
        assert r.pick == runs[0].name
    assert spent[None] < spent[0.7] < spent[0.9]


def test_near_best_stops_count_runs_within_the_noise_of_the_best() -> None:
    runs = grid(0.70, 0.70, 0.40)
    budget = float(runs[0].x[-1])

    def stop_second_and_third(runs_: object, b: float) -> object:
        return lambda view: {runs[1].name: "t", runs[2].name: "t"} if view.x_now == 100.0 else {}

    r = replay("t", runs, stop_second_and_third, budget)  # type: ignore[arg-type]
    assert near_best_stops(r, runs) == 1  # the twin of the best, not the clearly worse run


def test_frontier_comparison_is_at_no_more_compute() -> None:
    def scores(c: float, r: float) -> list[GridScore]:
        return [GridScore("g1", c, r, r, 0), GridScore("g2", c, r, r, 0)]

    table = {
        Setting("scalerl", "target 1"): scores(0.5, 0.001),
        Setting("scalerl", "target 0.3"): scores(0.3, 0.004),
        Setting("optuna-asha", "a"): scores(0.45, 0.01),  # scalerl's 0.3 setting beats it
        Setting("optuna-asha", "b"): scores(0.2, 0.02),  # scalerl spends more at every setting
        Setting("optuna-asha", "c"): scores(0.35, 0.002),  # cheaper than 0.5, better than 0.3's regret
    }
    pts = points(table, lambda g: True)
    ours = [p for p in pts if p.setting.policy == "scalerl"]
    theirs = [p for p in pts if p.setting.policy != "scalerl"]
    met = {m.pruner.setting.label: m.met for m in match_pruners(ours, theirs)}
    assert met == {"a": True, "b": False, "c": False}
    goal = at_compute(ours, 0.30)
    assert goal is not None and goal.setting.label == "target 0.3" and goal.grids == 2


def test_the_grid_document_sets_the_knob() -> None:
    assert parse_policy({}).compute_target is None
    assert parse_policy({"compute_target": 0.3}).compute_target == 0.3
    assert parse_policy({"compute_target": 0.05}).compute_target == 0.05  # below min_fraction: the early start
    for bad in (1.5, 0.0, -0.2, "0.3"):
        with pytest.raises(ValidationError, match="compute_target"):
            parse_policy({"compute_target": bad})


def _write(tmp: Path, run: RunCurve) -> str:
    path = tmp / f"{run.name}.csv"
    path.write_text("step,pass_rate\n" + "".join(f"{x:g},{y:.5f}\n" for x, y in zip(run.x, run.y, strict=True)))
    return str(path)


def test_cli_replays_a_target_and_prints_both_frontiers(tmp_path: Path) -> None:
    files = [_write(tmp_path, r) for r in grid(0.72, 0.70, 0.68, 0.66)]  # close: successive halving leaves one
    one = CliRunner().invoke(cli, ["replay", *files, "--policy", "scalerl", "--compute-target", "0.3", "--json"])
    assert one.exit_code == 0, one.output
    assert any(
        r["reason"] and r["reason"].startswith("compute target 0.3") for r in json.loads(one.output)["runs"].values()
    )
    html = tmp_path / "frontier.html"
    res = CliRunner().invoke(cli, ["replay", *files, "--frontier", "--orders", "1", "--plot", str(html), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    policies = {p["policy"] for p in out["points"]}
    assert policies == {"scalerl", "optuna-asha", "optuna-hyperband", "optuna-median"}
    labels = [p["label"] for p in out["points"] if p["policy"] == "scalerl"]
    assert labels == ["default"] + [
        f"target {t:g}" for t in (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.4, 0.3, 0.2, 0.1, 0.05)
    ]
    assert all(sum(p["near_best_rules"].values()) == p["near_best_stops"] for p in out["points"])
    assert isinstance(out["monotone"], bool) and out["monotone"] == (not out["monotone_violations"])
    assert html.read_text().count("Plotly") > 0
    floors = {f["start"]: f["compute"] for f in out["oracle_floor"]}
    assert list(floors) == list(FLOOR_STARTS)
    assert all(p["compute"] >= floors[0.0] - 1e-12 for p in out["points"])  # nothing beats the oracle's floor
    line = floor_line(floors)  # the text output's last line (the table the JSON leaves out)
    assert line.startswith("Oracle floor") and f"first evaluation {floors[0.0]:.3f}" in line, line
    bad = CliRunner().invoke(cli, ["replay", *files, "--plot", str(html)])
    assert bad.exit_code == 2 and "--frontier" in bad.output
    low = CliRunner().invoke(cli, ["replay", *files, "--compute-target", "0"])
    assert low.exit_code == 2 and "--compute-target" in low.output


def test_target_keep_p_keeps_a_run_that_may_still_beat_the_leader() -> None:
    """``target_keep_p``: a run the schedule would stop is kept while P(its value at the budget > the top-ranked
    run's) is at least the setting; a run clearly below the leader is stopped as before."""
    from rl_core.scaling.decide.compute_target import compute_target_candidates
    from rl_core.scaling.decide.recommend import Recommendation

    rng = np.random.default_rng(0)
    x = np.arange(5, dtype=np.float64) * 10.0  # 40 of a budget of 100: past min_fraction
    runs = [GridRun(f"r{k}", x, np.full(5, 0.5), "live", 100.0) for k in range(3)]
    draws = {
        0: rng.normal(0.70, 0.03, 1000),  # the leader
        1: rng.normal(0.68, 0.03, 1000),  # P(above the leader) about 0.3
        2: rng.normal(0.50, 0.01, 1000),  # clearly below
    }
    own = [Recommendation(r.run_id, "continue", "", {}) for r in runs]

    def stopped(policy: Policy) -> set[int]:
        return {i for _, i, _ in compute_target_candidates(runs, draws, frozenset({0}), own, set(), policy, 3)}

    assert stopped(Policy(compute_target=0.2)) == {1, 2}
    assert stopped(Policy(compute_target=0.2, target_keep_p=0.2)) == {2}
    assert stopped(Policy(compute_target=0.2, target_keep_p=0.5)) == {1, 2}  # 0.3 < 0.5: stopped again
    assert stopped(Policy(target_keep_p=0.2)) == set()  # without a target it does nothing


def test_target_start_lets_the_target_alone_stop_before_min_fraction() -> None:
    """``target_start``: the schedule starts there and its stops may come before ``min_fraction``; no other rule's
    stop does, and without it nothing stops before ``min_fraction``."""
    runs = grid(0.80, 0.60, 0.58, 0.56, 0.54, 0.52)
    at = _grid_runs(runs, 3)  # x = 20 of a budget of 290: 7% of it, below min_fraction 0.1
    assert all(r.action != "stop" for r in decide_grid(at, Policy(compute_target=0.2, target_start=0.1)))
    early = decide_grid(at, Policy(compute_target=0.2, target_start=0.03))
    stopped = [r for r in early if r.action == "stop"]
    assert stopped and all(r.rule == "compute_target" for r in stopped), [(r.rule, r.reason) for r in early]
    assert early[0].action != "stop"  # the leader
    assert all(r.action != "stop" for r in decide_grid(at, Policy(target_start=0.03)))  # no target: nothing


def test_the_oracle_floor_keeps_one_run_and_stops_the_rest_at_the_first_evaluation_from_its_start() -> None:
    x = np.array([0.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0])
    runs = [RunCurve(f"r{k}", x, np.linspace(0.1, 0.5 + 0.05 * k, x.size)) for k in range(4)]
    # judged at the first evaluation after any training (5 of 100): one run whole, three at 5
    assert oracle_floor(runs, 0.0) == pytest.approx((100 + 3 * 5) / 400)
    assert oracle_floor(runs, 1 / 9) == pytest.approx((100 + 3 * 20) / 400)  # first evaluation at or after 11.1
    assert oracle_floor(runs, 1.0) == pytest.approx(1.0)  # nothing to judge before the budget: every run whole
    assert oracle_floor(runs, 0.0, budget=50.0) == pytest.approx((50 + 3 * 5) / 200)
    floors = [oracle_floor(runs, s) for s in FLOOR_STARTS]
    assert floors == sorted(floors)  # a later start never spends less
