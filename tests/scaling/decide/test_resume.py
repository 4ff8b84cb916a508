"""Freeze-thaw: a run the grid comparison stopped comes back when the runs that justified the stop fall below it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter

from rl_core.scaling import GridRun, Policy, decide_grid
from rl_core.scaling.decide.policy import ResumeRule
from rl_core.scaling.decide.resume import REASON_PREFIXES, RESUMABLE_RULES, resumable_rule
from rl_core.scaling.measure.replay import GridView, Moves, RunCurve, StopPolicy, load_grid, replay, scalerl_policy
from tests.scaling.conftest import make_curve

NUMINA = Path(__file__).resolve().parents[2] / "fixtures/public_grids/speed_rl_math500/1p5b_numina_rloo"


def test_a_run_stopped_before_the_leader_collapsed_is_resumed_and_wins() -> None:
    """SPEED-RL on MATH500: the fast recipe leads early, the plain run is stopped as dominated at ~10% of the
    budget, then the leader decays to below where the plain run's forecast stands; the plain run ends best."""
    runs = load_grid(sorted(NUMINA.glob("*.csv")), "time_s", "pass_rate")
    frozen = replay("scalerl", runs, scalerl_policy(Policy(resume=None)))
    thawed = replay("scalerl", runs, scalerl_policy(Policy()))
    plain = "1.5B-Math-RLOO-Numina-N24"
    assert frozen.regret > 0.1 and {r.name: r.stopped_at for r in frozen.runs}[plain] is not None
    out = {r.name: r for r in thawed.runs}[plain]
    assert out.resumed_from and out.stopped_at is None and out.reason is not None and out.reason.startswith("resume")
    assert thawed.pick == plain and thawed.regret == 0.0
    # its compute goes on from where it stopped: it reaches the budget once, and the grid ends later
    assert out.compute == pytest.approx(thawed.budget) and thawed.elapsed > 1.0


def _stop_then_resume(runs: Sequence[RunCurve], budget: float) -> StopPolicy:
    del runs, budget

    def policy(view: GridView) -> Moves:
        if view.x_now == 2.0:
            return Moves(stop={"a": "test stop"})
        if view.x_now == 4.0 and "a" in view.stopped:
            return Moves(resume={"a": "test resume"})
        return Moves()

    return policy


def test_the_replay_charges_a_resumed_run_from_its_stop() -> None:
    x = np.arange(0.0, 11.0)
    runs = [RunCurve("a", x, 0.5 + 0.01 * x), RunCurve("b", x, 0.4 + 0.01 * x)]
    r = replay("t", runs, _stop_then_resume)
    a = {o.name: o for o in r.runs}["a"]
    assert a.resumed_from == (2.0,) and a.stopped_at is None and a.compute == 10.0
    assert r.compute == 1.0 and r.pick == "a" and r.regret == 0.0
    assert r.elapsed == pytest.approx(12.0 / 10.0)  # a was paused from time 2 to 4
    assert r.to_dict()["runs"]["a"]["resumed_from"] == [2.0]  # type: ignore[index]


def _collapsed_leader_and_stopped_run(stop_rule: str | None) -> list[GridRun]:
    """A live run that plateaus at 0.45 over its whole budget, and a run stopped at 40% on its way to 0.75."""
    x, low = make_curve(A=0.45, noise=0.004, seed=3)
    _, high = make_curve(A=0.75, noise=0.004, seed=4)
    k = 17
    return [
        GridRun("live", x, low, "live", 1000.0),
        GridRun("stopped", x[:k], high[:k], "stopped", 1000.0, stop_rule=stop_rule),
    ]


@pytest.mark.parametrize("rule", sorted(RESUMABLE_RULES))
def test_a_grid_stop_is_undone_when_the_stopped_run_now_forecasts_higher(rule: str) -> None:
    recs = {r.run_id: r for r in decide_grid(_collapsed_leader_and_stopped_run(rule), Policy())}
    rec = recs["stopped"]
    assert rec.action == "resume" and rec.rule == "resume", rec
    numbers = rec.numbers
    assert numbers["p_above_leader"] is not None and numbers["p_above_leader"] >= 0.5
    assert f"{numbers['p_above_leader']:.2f}" in rec.reason and f"({rule})" in rec.reason
    assert decide_grid(_collapsed_leader_and_stopped_run(rule), Policy(resume=None))[1].action != "resume"


def test_a_document_with_resume_null_never_resumes() -> None:
    """``resume: null`` in a policy document (``p_resume: null`` in the old flat form) is the rule off: the run the
    default policy resumes stays stopped."""
    grid = _collapsed_leader_and_stopped_run("dominated")
    assert decide_grid(grid, TypeAdapter(Policy).validate_python({}))[1].action == "resume"
    for document in ({"resume": None}, {"p_resume": None}, {"p_resume": None, "max_resumes": 5}):
        off = TypeAdapter(Policy).validate_python(document)
        assert off.resume is None and off == Policy(resume=None)
        rec = decide_grid(grid, off)[1]
        assert rec.action != "resume" and rec.rule not in ("resume", "resume_limit", "resume_pending"), rec


def test_a_near_tie_is_not_resumed_for_a_gain_below_resume_gain() -> None:
    """Ahead of the leader by less than the evaluation noise: stopping it cost nothing worth a requeue (without the
    gap between ``min_expected_gain`` and ``resume_gain``, near-ties were stopped and resumed again and again)."""
    x, live = make_curve(A=0.600, noise=0.002, seed=3)
    _, close = make_curve(A=0.605, noise=0.002, seed=4)
    k = 25
    runs = [  # the live run one evaluation short of its budget: still forecast (at its budget it is observed)
        GridRun("live", x[:-1], live[:-1], "live", 1000.0),
        GridRun("stopped", x[:k], close[:k], "stopped", 1000.0, stop_rule="cannot_matter"),
    ]
    rec = decide_grid(runs, Policy(resume=ResumeRule(gain=0.0)))[1]
    assert rec.action == "resume" and rec.numbers["expected_gain_over_leader"] is not None, rec
    p_above = rec.numbers["p_above_leader"]
    # ahead (0.71 with the calibrated comparison's wider bands, 0.8 and above on the raw posterior), but by little
    assert p_above is not None and p_above >= 0.65
    gain = rec.numbers["expected_gain_over_leader"]
    assert 0.0 < gain < ResumeRule().gain and f"{gain:.4f}" in rec.reason
    assert decide_grid(runs, Policy())[1].action != "resume"


@pytest.mark.parametrize("rule", [None, "threshold", "divergence", "falling", "plateau"])
def test_other_stops_are_never_undone(rule: str | None) -> None:
    """A user's stop (no rule), an observed-value rule or the run's own forecast: only a person resumes those."""
    recs = decide_grid(_collapsed_leader_and_stopped_run(rule), Policy())
    assert recs[1].action != "resume" and recs[1].rule != "resume_pending"


def test_every_resumable_rule_has_a_reason_prefix() -> None:
    assert set(REASON_PREFIXES.values()) == RESUMABLE_RULES
    assert resumable_rule("dominated: P(value at budget < x's − 0.01) = 0.95 ≥ 0.9") == "dominated"
    assert resumable_rule("successive halving: at 11% of the budget ...") == "rung"
    assert resumable_rule("below the threshold 0.5") is None


def test_a_run_resumed_max_resumes_times_stays_stopped() -> None:
    """The same collapsed leader and stopped run: resumed while the policy has resumed it fewer than
    ``max_resumes`` times, kept stopped once it has (each resume is a restart; a near-tie must not flip forever)."""
    runs = _collapsed_leader_and_stopped_run("dominated")
    policy = Policy(resume=ResumeRule(max_resumes=2))
    for resumes, resumed in ((0, True), (1, True), (2, False), (5, False)):
        again = [runs[0], replace(runs[1], resumes=resumes)]
        rec = decide_grid(again, policy)[1]
        assert (rec.action == "resume") is resumed, resumes
        if not resumed:  # it stays stopped, and says why, with the numbers the resume rule read
            assert rec.action == "stop" and rec.rule == "resume_limit", rec
            assert rec.numbers["resumes"] == resumes and rec.numbers["max_resumes"] == 2
            assert f"resumed {resumes} times already (max_resumes 2)" in rec.reason and "by hand" in rec.reason
            p_above = rec.numbers["p_above_leader"]
            assert p_above is not None and f"{p_above:.2f}" in rec.reason
    assert (
        decide_grid([runs[0], replace(runs[1], resumes=5)], Policy(resume=ResumeRule(max_resumes=None)))[1].action
        == "resume"
    )


def test_the_replay_counts_the_policy_resumes_per_run() -> None:
    """The replay hands each run's resume count to the policy, as the service reads it from its transitions: with
    ``max_resumes`` = 0 the collapsed leader's rival is never brought back (and the replay loses the pick)."""
    runs = load_grid(sorted(NUMINA.glob("*.csv")), "time_s", "pass_rate")
    none = replay("scalerl", runs, scalerl_policy(Policy(resume=ResumeRule(max_resumes=0))))
    assert all(not r.resumed_from for r in none.runs) and none.regret > 0.1
    once = replay("scalerl", runs, scalerl_policy(Policy(resume=ResumeRule(max_resumes=1))))
    assert max(len(r.resumed_from) for r in once.runs) == 1
