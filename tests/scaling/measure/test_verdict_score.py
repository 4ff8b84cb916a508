"""Scoring the verdict users read over a replay (rl_core.scaling.measure.verdict_score)."""

from __future__ import annotations

import numpy as np

from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.measure.replay import ReplayResult, RunCurve, VerdictStep, replay, scalerl_policy
from rl_core.scaling.measure.verdict_score import score_verdicts, tolerance

X = np.linspace(100.0, 3000.0, 30)


def _run(name: str, A: float, C_mid: float, seed: int, noise: float = 0.005) -> RunCurve:
    rng = np.random.default_rng(seed)
    y = np.clip(sigmoid(X, R0=0.1, A=A, B=1.6, C_mid=C_mid) + rng.normal(0, noise, X.size), 0, 1)
    return RunCurve(name, X, y)


def test_the_score_reads_the_recorded_verdicts() -> None:
    runs = [_run("best", 0.7, 800.0, 0), _run("close", 0.69, 800.0, 1), _run("far", 0.4, 800.0, 2)]
    finals = {r.name: r.final(3000.0) for r in runs}
    steps = (
        VerdictStep(300.0, "far", True, 0.95, "forecast", stop=("best",)),  # wrong, and a near-best run told to stop
        VerdictStep(1500.0, "best", True, 0.95, "forecast", stop=("far",)),
        VerdictStep(3000.0, "best", True, 0.99, "observed", stop=("best",)),  # the leader told to stop
    )
    result = ReplayResult("scalerl-advice", 3000.0, 1.0, "best", 0.0, "best", (), verdicts=steps)
    v = score_verdicts(result, runs)
    assert v is not None
    assert v.tolerance == tolerance(runs, 3000.0) and v.tolerance >= 0.01
    assert v.decided_at == 0.1 and v.decided_at_end and v.end_basis == "observed"
    assert v.named_regret_first == max(finals.values()) - finals["far"]
    assert v.named_regret_end == 0.0
    assert v.wrong_once_decided == 1 / 3
    assert v.near_best_stopped == 1 and v.leader_stops == 1
    assert not v.separated  # "close" ends within the noise of "best"
    assert score_verdicts(ReplayResult("none", 3000.0, 1.0, "best", 0.0, "best", ()), runs) is None


def test_advice_mode_never_tells_the_leader_to_stop_and_decides_a_separated_grid_by_observation() -> None:
    runs = [_run("a", 0.72, 900.0, 3), _run("b", 0.55, 700.0, 4), _run("c", 0.45, 600.0, 5)]
    r = replay("scalerl-advice", runs, scalerl_policy(enact=False))
    assert r.compute == 1.0 and r.verdicts  # nothing stopped; one verdict per evaluation
    v = score_verdicts(r, runs)
    assert v is not None
    assert v.leader_stops == 0 and v.near_best_stopped == 0
    assert v.separated and v.decided_at_end and v.end_basis == "observed"
    assert v.named_regret_end == 0.0 and v.wrong_once_decided == 0.0
