"""The scorecard of a grid the service decided live equals the replay of its stored points under the same policy.

The service assesses after every evaluation here (all runs report in lockstep, one ``POST .../recommendations``
per evaluation, no background assessment), so it decides at the replay's evaluation times: the same points, the
same policy, the same joint fit (``cached_fitter`` with the experiment's fit options is what the fit pool runs).
Then the compute the stops saved, the moment the verdict was first decided (as a share of the grid's budget) and
the run it named are the replay's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rl_core.scaling import sigmoid
from rl_core.scaling.measure.replay import ReplayResult, RunCurve, cached_fitter, replay, scalerl_policy
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Experiment
from tests.server.conftest import Service, make_settings, start_service

BUDGET = 8000.0
N = 12
X = np.linspace(BUDGET / N, BUDGET, N)
CURVES = {  # by batch.prompts: one clear leader, one run that plateaus low, one in between
    32: dict(A=0.85, B=1.6, C_mid=2500.0),
    48: dict(A=0.30, B=1.8, C_mid=1200.0),
    64: dict(A=0.62, B=1.7, C_mid=2200.0),
}


@pytest.fixture
def service(database_url: str, tmp_path: Path) -> Iterator[Service]:
    """Assessed only when the test asks (no background assessment), so decisions happen at every evaluation."""
    yield from start_service(make_settings(database_url, tmp_path, interval_refit=False))


def _values(prompts: int) -> np.ndarray:
    rng = np.random.default_rng(prompts)
    y = sigmoid(X, R0=0.1, **CURVES[prompts]) + rng.normal(0, 0.004, N)
    return np.round(np.clip(y, 0.0, 1.0), 6)


def _post(service: Service, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = service.client.post(path, json=body, headers=service.write)
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


def _assess(service: Service, experiment_id: int) -> None:
    """Assess now (the POST's job) and wait until the assessment is stored."""
    r = service.client.post(f"/api/v1/experiments/{experiment_id}/recommendations", headers=service.write)
    assert r.status_code == 202, r.text
    job = service.client.get(r.json()["status_url"], params={"wait": 60}, headers=service.read).json()
    assert job["status"] == "succeeded", job


def _drive(service: Service, policy: dict[str, Any]) -> tuple[dict[str, Any], ReplayResult]:
    """The grid reported in lockstep, assessed after each evaluation (stopped runs stop reporting; the last
    evaluation finishes the others), then its scorecard and the replay of the same points under the same policy."""
    doc = {
        "name": "scorecard-replay",
        "preset": "scalerl",
        "grid": {"batch.prompts": list(CURVES)},
        "seeds": [0],
        "task": "gsm8k",
        "model": "tiny",
        "budget": BUDGET,
        "policy": policy,
    }
    exp = _post(service, "/api/v1/experiments", doc)
    runs = {r["id"]: r["name"] for r in exp["runs"]}
    values = {rid: _values(int(name.split(",")[0].split("=")[1])) for rid, name in runs.items()}
    live = set(runs)
    for i in range(N):
        for rid in sorted(live):
            point = {"step": (i + 1) * 10, "compute": float(X[i]), "pass_rate": float(values[rid][i])}
            _post(service, f"/api/v1/runs/{rid}/metrics", {"points": [point]})
        if i == N - 1:
            for rid in sorted(live):
                _post(service, f"/api/v1/runs/{rid}/status", {"status": "succeeded", "reason": "budget reached"})
        _assess(service, exp["id"])
        for rid in sorted(live):
            if service.client.get(f"/api/v1/runs/{rid}", headers=service.read).json()["status"] == "stopping":
                _post(service, f"/api/v1/runs/{rid}/status", {"status": "stopped", "reason": "the trainer stopped"})
                live.discard(rid)
    card = service.client.get(f"/api/v1/experiments/{exp['id']}/scorecard", headers=service.read).json()
    with service.ctx.sessions() as session:
        experiment = session.get(Experiment, exp["id"])
        assert experiment is not None
        spec = ExperimentSpec.of(experiment)
    curves = [RunCurve(runs[rid], X, values[rid]) for rid in sorted(runs)]
    enact = spec.policy.mode == "auto_stop"
    factory = scalerl_policy(spec.policy, cached_fitter(spec.fit.options()), enact=enact)
    return card, replay("scalerl", curves, factory, BUDGET)


def test_saved_compute_and_the_best_run_equal_the_replay_under_auto_stop(service: Service) -> None:
    card, result = _drive(service, {"mode": "auto_stop", "resume": None})
    stopped = {r.name for r in result.runs if r.stopped_at is not None}
    assert stopped, "the grid is meant to have runs stopped"
    assert not any(r.resumed_from for r in result.runs)
    assert {g["run_name"] for g in card["runs"] if g["status"] == "stopped"} == stopped
    # compute saved, in the unit and as a share: the replay's 1 - compute
    assert card["budget"] == pytest.approx(BUDGET * len(result.runs))
    assert card["saved_share"] == pytest.approx(1.0 - result.compute, abs=1e-9)
    assert card["saved"] == pytest.approx(sum(BUDGET - r.compute for r in result.runs), abs=1e-6)
    assert card["compute_used"] == pytest.approx(sum(r.compute for r in result.runs), abs=1e-6)
    # the run named best is the replay's (its pick: the best run that was never stopped); once no run is live the
    # stopped ones (no usable forecast, so the policy can never resume them) are not waited for: decided
    assert card["best_run_name"] == result.verdicts[-1].best == result.pick
    assert card["decided"] and card["first_decided"] is not None, card


def test_the_first_decided_moment_equals_the_replay_of_the_advice(service: Service) -> None:
    card, result = _drive(service, {"mode": "recommend"})
    assert card["saved"] == 0.0 and result.compute == 1.0
    first = next(v for v in result.verdicts if v.decided)
    assert card["first_decided"] is not None, card
    # every run reports in lockstep to the budget: the compute spent then is x for each run
    assert card["first_decided"]["share_of_budget"] == pytest.approx(first.x / BUDGET, abs=1e-9)
    assert card["first_decided"]["best_run_name"] == first.best
    assert card["decided"] and card["best_run_name"] == result.verdicts[-1].best
    later = [v.best if v.decided else None for v in result.verdicts if v.x > first.x]
    names = [c["best_run_name"] if c["decided"] else None for c in card["changes"]]
    assert names == [b for k, b in enumerate(later) if b != ([first.best, *later][k])]


def test_the_first_decided_moment_equals_the_replay_under_auto_stop(service: Service) -> None:
    """Runs stopped by a rule the policy may undo are waited for by the service while any run is live; the replay
    reads the same decided rule with the same waiting set, so it decides at the same evaluation and names the same
    run (the replay once decided as soon as the live runs were ranked)."""
    card, result = _drive(service, {"mode": "auto_stop", "resume": None})
    stopped_at = [r.stopped_at for r in result.runs if r.stopped_at is not None]
    assert stopped_at and min(stopped_at) < BUDGET, "the grid is meant to have runs stopped before the budget"
    first = next(k for k, v in enumerate(result.verdicts) if v.decided)
    x = result.verdicts[first].x
    assert card["first_decided"] is not None, card
    # one assessment per evaluation: the stored version that first decided is the evaluation's number
    assert card["first_decided"]["assessment_version"] == first + 1
    assert card["first_decided"]["best_run_name"] == result.verdicts[first].best
    spent = sum(min(x, r.stopped_at if r.stopped_at is not None else x) for r in result.runs)
    assert card["first_decided"]["spent"] == pytest.approx(spent, rel=1e-9)
    # the grid's one remaining recipe led from the stops on, but the stopped runs could have been resumed
    assert x > min(stopped_at) and any(v.best is not None and not v.decided for v in result.verdicts)
