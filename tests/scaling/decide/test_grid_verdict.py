"""The grid's answer (rl_core.scaling.decide.grid_verdict): one leader rule, observed values once a run is done."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rl_core.scaling import GridRun, fit_curve
from rl_core.scaling.decide.grid_decisions import assess_grid
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.summary import summarize

BUDGET = 8000.0
X = np.linspace(BUDGET / 30, BUDGET, 30)


def _curve(A: float, B: float, C_mid: float, seed: int, noise: float = 0.004) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(sigmoid(X, R0=0.1, A=A, B=B, C_mid=C_mid) + rng.normal(0, noise, X.size), 0, 1)


def _steep_and_flat(status: str = "completed") -> list[GridRun]:
    """``steep`` still rises at its budget (its fitted ceiling sits on the A = 1 bound) and ends highest; ``flat``
    saturated early, lower."""
    steep = _curve(0.98, 1.5, 12000.0, 1)
    flat = _curve(0.36, 1.8, 1500.0, 2)
    return [
        GridRun("steep", X, steep, status, BUDGET),  # type: ignore[arg-type]
        GridRun("flat", X, flat, status, BUDGET),  # type: ignore[arg-type]
    ]


def test_the_steepest_run_leads_though_its_ceiling_is_on_the_bound() -> None:
    runs = _steep_and_flat()
    fits = [fit_curve(r.x, r.y) for r in runs]
    assert not summarize(fits[0]).ceiling_identified  # not identified: what kept it from leading before
    assert summarize(fits[1]).ceiling_identified
    assert runs[0].y[-3:].mean() > runs[1].y[-3:].mean() + 0.02
    out = assess_grid(runs, Policy(), fits=fits)
    v = out.verdict
    assert v.best == 0 and v.runner_up == 1 and v.order == (0, 1)
    assert out.recommendations[0].rule == "leader"
    assert v.difference is not None and v.difference > 0
    assert v.basis == "observed" and v.observed == frozenset({0, 1})
    assert v.decided() and v.confidence is not None and v.confidence >= 0.9
    # the value shown is the observation: the mean of the last three evaluations (the median of its draws)
    assert abs(float(out.recommendations[0].numbers["V_budget"] or 0) - float(runs[0].y[-3:].mean())) < 0.002
    assert out.recommendations[0].numbers.get("observed") == 1.0


def test_a_live_run_that_reached_its_budget_is_valued_by_observation() -> None:
    runs = _steep_and_flat(status="live")
    v = assess_grid(runs, Policy()).verdict
    assert v.basis == "observed" and v.best == 0 and v.decided()


def test_finals_within_the_noise_are_not_shown_to_differ() -> None:
    a = _curve(0.5, 1.8, 2000.0, 3, noise=0.03)
    b = _curve(0.5, 1.8, 2000.0, 4, noise=0.03)
    runs = [GridRun("a", X, a, "completed", BUDGET), GridRun("b", X, b, "completed", BUDGET)]
    v = assess_grid(runs, Policy()).verdict
    assert v.basis == "observed" and v.confidence is not None
    assert not v.decided() and 0.1 < v.confidence < 0.9
    assert v.difference is not None and v.difference >= 0  # the best is never below its runner-up


def test_a_leader_whose_rivals_were_all_stopped_is_decided() -> None:
    runs = _steep_and_flat(status="live")
    half = [replace(r, x=r.x[:15], y=r.y[:15]) for r in runs]
    stopped = [half[0], replace(half[1], status="stopped", stop_rule="dominated")]
    v = assess_grid(stopped, Policy()).verdict
    assert v.best == 0 and v.runner_up is None and v.others_dominated and v.decided()


def test_no_run_waits_and_nothing_is_decided_without_values() -> None:
    runs = [GridRun("a", X[:2], _curve(0.5, 1.8, 2000.0, 5)[:2], "live", BUDGET), GridRun("b", X[:0], X[:0])]
    v = assess_grid(runs, Policy()).verdict
    assert not v.decided() and 1 in v.waiting
