"""Experiment-level recommendations (recommend vs auto_stop) and the CI verdict, on curves with known ceilings."""

from __future__ import annotations

from typing import Any

import pytest

from rl_core.scaling.fit.prior import load_prior
from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc


def _two_runs(
    service: Service, policy: str, a_high: float = 0.65, a_low: float = 0.45, c_max: float = 8000.0
) -> tuple[int, int, int]:
    exp = service.client.post(
        "/api/v1/experiments", json=sweep_doc(policy={"mode": policy}), headers=service.write
    ).json()
    hi, lo = exp["runs"][0]["id"], exp["runs"][1]["id"]
    for run_id, a in ((hi, a_high), (lo, a_low)):
        r = service.client.post(
            f"/api/v1/runs/{run_id}/metrics",
            json={"points": curve_points(A=a, n=40, seed=run_id, c_max=c_max)},
            headers=service.write,
        )
        assert r.status_code == 200
    service.drain()  # the assessment is computed off the request path; reads never fit
    return exp["id"], hi, lo


def _recs(service: Service, exp_id: int) -> dict[int, dict[str, Any]]:
    r = service.client.post(f"/api/v1/experiments/{exp_id}/recommendations", headers=service.write)
    assert r.status_code == 202, r.text
    job = service.client.get(r.json()["status_url"], params={"wait": 60}, headers=service.read).json()
    assert job["status"] == "succeeded", job
    return {x["run_id"]: x for x in job["result"]["recommendations"]}


def test_recommend_mode_only_reports(service: Service) -> None:
    exp_id, hi, lo = _two_runs(service, "recommend")
    recs = _recs(service, exp_id)
    assert recs[lo]["action"] == "stop" and recs[lo]["rule"] == "dominated"
    assert recs[hi]["action"] == "scale" and recs[hi]["rule"] == "leader"
    # The reason names the leader by name and quotes the very numbers stored beside it.
    numbers = recs[lo]["numbers"]
    assert numbers["leader_V_budget"] > 0.6 and f"{numbers['p_below']:.2f}" in recs[lo]["reason"]
    assert f"{numbers['V_budget']:.3f} vs {numbers['leader_V_budget']:.3f}" in recs[lo]["reason"]
    assert recs[hi]["run_name"] in recs[lo]["reason"]
    run = service.client.get(f"/api/v1/runs/{lo}", headers=service.read).json()
    assert run["status"] == "running" and run["action"] == "continue"
    stored = service.client.get(f"/api/v1/experiments/{exp_id}/recommendations", headers=service.read).json()
    assert {r["run_id"] for r in stored["recommendations"]} == {hi, lo}


def test_a_finished_run_gets_no_advice(service: Service) -> None:
    """A run that succeeded, failed or was stopped was still told to stop, continue or scale."""
    exp_id, hi, lo = _two_runs(service, "recommend")
    assert set(_recs(service, exp_id)) == {hi, lo}
    done = service.client.post(
        f"/api/v1/runs/{lo}/status", json={"status": "succeeded", "reason": "budget reached"}, headers=service.write
    )
    assert done.status_code == 200, done.text
    stored = service.client.get(f"/api/v1/experiments/{exp_id}/recommendations", headers=service.read).json()
    assert [r["run_id"] for r in stored["recommendations"]] == [hi]  # the snapshot decided while lo was running
    assert set(_recs(service, exp_id)) == {hi}  # and a fresh decision


def test_auto_stop_stops_the_worse_run(service: Service) -> None:
    _, hi, lo = _two_runs(service, "auto_stop")
    service.drain()  # the off-request refit applies the policy on its own
    run = service.client.get(f"/api/v1/runs/{lo}", headers=service.read).json()
    # Whichever grid rule fires first (forecast dominance, or the gap at equal compute) names itself in the reason.
    assert run["status"] == "stopping" and run["status_reason"].startswith(
        ("auto_stop: dominated", "auto_stop: behind")
    )
    more = {"points": [{"step": 10_000, "compute": 8100.0, "pass_rate": 0.45}]}
    answer = service.client.post(f"/api/v1/runs/{lo}/metrics", json=more, headers=service.write).json()
    assert answer["action"] == "stop"
    assert service.client.get(f"/api/v1/runs/{hi}", headers=service.read).json()["status"] == "running"


def test_verdict_is_the_decisions_leader(service: Service) -> None:
    exp_id, hi, lo = _two_runs(service, "recommend")
    v = service.client.get(f"/api/v1/experiments/{exp_id}/verdict", headers=service.read).json()
    # the points reach the budget (8000): both runs are compared on what they observed there
    assert v["decided"] is True and v["basis"] == "observed"
    assert v["best_run_id"] == hi and v["runner_up_id"] == lo
    assert abs(v["difference_at_budget"] - 0.2) < 0.05 and v["confidence"] >= 0.9
    assert v["finished"] is False and [r["run_id"] for r in v["ranking"]] == [hi, lo]
    recs = _recs(service, exp_id)
    assert recs[hi]["rule"] == "leader" and v["ranking"][1]["rule"] == recs[lo]["rule"] == "dominated"
    assert v["ranking"][0]["V_budget"] == pytest.approx(recs[hi]["numbers"]["V_budget"])


def test_mid_run_the_verdict_is_by_forecast(service: Service) -> None:
    exp_id, hi, lo = _two_runs(service, "recommend", c_max=4000.0)
    v = service.client.get(f"/api/v1/experiments/{exp_id}/verdict", headers=service.read).json()
    assert v["basis"] == "forecast" and v["best_run_id"] == hi and v["runner_up_id"] == lo
    assert v["difference_at_budget"] > 0 and "forecasts" in v["reason"]
    assert all(not r["observed"] for r in v["ranking"])


def test_a_near_tie_is_undecided(service: Service) -> None:
    exp_id, _, _ = _two_runs(service, "recommend", a_high=0.60, a_low=0.598)
    v = service.client.get(f"/api/v1/experiments/{exp_id}/verdict", headers=service.read).json()
    assert v["decided"] is False and v["confidence"] < 0.9 and "not decided" in v["reason"]


def test_verdict_undecided_without_two_fits(service: Service) -> None:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    run_id = exp["runs"][0]["id"]
    v = service.client.get(f"/api/v1/experiments/{exp['id']}/verdict", headers=service.read).json()
    assert v["decided"] is False and v["best_run_id"] is None and "no run" in v["reason"]
    service.client.post(
        f"/api/v1/runs/{run_id}/metrics", json={"points": curve_points(A=0.6, n=20)}, headers=service.write
    )
    service.drain()
    v = service.client.get(f"/api/v1/experiments/{exp['id']}/verdict", headers=service.read).json()
    assert v["decided"] is False and v["best_run_id"] == run_id and "only one run" in v["reason"]
    assert service.client.get("/api/v1/experiments/999/verdict", headers=service.read).status_code == 404


def test_reach_gives_compute_to_a_target_and_etas(service: Service) -> None:
    _, hi, _ = _two_runs(service, "recommend")
    r = service.client.get(f"/api/v1/runs/{hi}/reach", params={"target": 0.6}, headers=service.read)
    assert r.status_code == 200, r.text
    out = r.json()
    # the 0.65-ceiling sigmoid (R0 0.3, C_mid 2500, B 1.8) reaches 0.6 near C = 2500 * (0.3/0.05)^(1/1.8) ≈ 6,800
    assert out["reachable"] is True and 5000 < out["compute"] < 9000 and out["lo"] <= out["compute"] <= out["hi"]
    assert out["probability"] > 0.9 and 30 <= out["n_points"] <= 40  # the fit leaves the burn-in out
    above = service.client.get(f"/api/v1/runs/{hi}/reach", params={"target": 0.9}, headers=service.read).json()
    assert above["reachable"] is False and above["compute"] is None and above["eta_seconds"] is None
    bad = service.client.get(f"/api/v1/runs/{hi}/reach", params={"target": 1.5}, headers=service.read)
    assert bad.status_code == 422 and "target" in bad.text


def test_policy_rules_are_strict_and_stop_with_their_reason(service: Service) -> None:
    bad = sweep_doc(name="bad-policy", policy={"threshold": {"value": "0.3"}})
    r = service.client.post("/api/v1/experiments", json=bad, headers=service.write)
    assert r.status_code == 422 and "threshold" in r.text
    doc = sweep_doc(
        name="threshold-policy", policy={"mode": "auto_stop", "threshold": {"value": 0.5, "min_compute": 0}}
    )
    exp = service.client.post("/api/v1/experiments", json=doc, headers=service.write).json()
    low = exp["runs"][1]["id"]
    points = [{"step": i, "compute": 100.0 * i, "pass_rate": 0.2} for i in range(1, 4)]
    assert service.client.post(f"/api/v1/runs/{low}/metrics", json={"points": points}, headers=service.write).is_success
    recs = _recs(service, exp["id"])
    assert recs[low]["action"] == "stop" and recs[low]["rule"] == "threshold"
    run = service.client.get(f"/api/v1/runs/{low}", headers=service.read).json()
    assert run["status"] == "stopping" and "below the threshold" in run["status_reason"]


def test_fit_spec_chooses_the_prior(service: Service) -> None:
    """The shipped prior, flat priors, or a prior of your own (the JSON ``scalerl prior build`` writes)."""
    from rl_core.scaling.fit.prior import ShapePrior

    own = ShapePrior(mean=(-2.3, -0.4), cov=((0.3, 0.0), (0.0, 0.2)), version="team-1", extrapolation_sd=0.01)
    fits, used = {}, {}
    for label, prior in (("public", "public"), ("default", "default"), ("none", "none"), ("own", own.to_json())):
        doc = sweep_doc(name=f"prior-{label}", fit={"prior": prior})
        exp = service.client.post("/api/v1/experiments", json=doc, headers=service.write).json()
        run_id = exp["runs"][0]["id"]
        points = curve_points(A=0.6, n=8, c_max=2000.0, seed=3)  # early: the prior matters
        service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}, headers=service.write)
        recs = _recs(service, exp["id"])
        fits[label] = recs[run_id]["numbers"]
        service.drain()
        forecast = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()["forecast"]
        used[label] = forecast["fit"]["prior"] if forecast else "no forecast"
    assert fits["public"]["A"] != pytest.approx(fits["none"]["A"], abs=1e-6)
    # "default", the shipped prior's name until 2026-11-25, still means it (stored experiments keep their fits)
    assert fits["default"] == fits["public"] and used["default"] == used["public"] == load_prior().version, used
    assert fits["own"]["B"] != pytest.approx(fits["public"]["B"], abs=1e-6)
    assert fits["own"]["B"] < fits["public"]["B"]  # the own prior's shape is shallower (B ~ 0.67 against ~ 2)
    assert used["own"].startswith("team-1") and used["none"] is None, used  # the stored fit says which prior
    bad = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name="p", fit={"prior": "flat"}), headers=service.write
    )
    assert bad.status_code == 422 and "prior" in bad.text
    not_pd = {**own.to_json(), "cov": [[1.0, 2.0], [2.0, 1.0]]}
    bad = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name="q", fit={"prior": not_pd}), headers=service.write
    )
    assert bad.status_code == 422 and "positive-definite" in bad.text


def test_an_experiments_runs_are_fitted_as_a_grid_and_a_lone_run_on_its_own(service: Service) -> None:
    _, _, lo = _two_runs(service, "recommend")
    service.drain()
    # the second run's points arrive when its sibling already has a curve: its stored fit is the joint one
    forecast = service.client.get(f"/api/v1/runs/{lo}", headers=service.read).json()["forecast"]
    assert any("grid fit" in n for n in forecast["fit"]["notes"]), forecast["fit"]["notes"]
    lone = service.client.post("/api/v1/runs", json={"name": "lone"}, headers=service.write).json()
    service.client.post(
        f"/api/v1/runs/{lone['id']}/metrics", json={"points": curve_points(A=0.6, n=30)}, headers=service.write
    )
    other = service.client.post("/api/v1/runs", json={"name": "lone-2"}, headers=service.write).json()
    service.client.post(
        f"/api/v1/runs/{other['id']}/metrics", json={"points": curve_points(A=0.5, n=30)}, headers=service.write
    )
    service.drain()
    forecast = service.client.get(f"/api/v1/runs/{lone['id']}", headers=service.read).json()["forecast"]
    assert forecast is not None and not any("grid fit" in n for n in forecast["fit"]["notes"])


def _seeded_grid(service: Service, twin_ceiling: float, **policy: Any) -> tuple[int, dict[str, int]]:
    """Two recipes x two seeds: batch.prompts=32 with ceilings 0.65 (seed 0) and ``twin_ceiling`` (seed 1), the
    other recipe's seeds at 0.45. Returns the experiment id and the run ids by name."""
    doc = sweep_doc(policy={"mode": "recommend", **policy}, seeds=[0, 1])
    exp = service.client.post("/api/v1/experiments", json=doc, headers=service.write).json()
    ids = {r["name"]: r["id"] for r in exp["runs"]}
    ceilings = {"batch.prompts=32,seed=0": 0.65, "batch.prompts=32,seed=1": twin_ceiling}
    for name, run_id in ids.items():
        points = curve_points(A=ceilings.get(name, 0.45), n=40, seed=run_id)
        assert service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}, headers=service.write)
    return exp["id"], ids


@pytest.mark.parametrize("rank", [False, True])
def test_seeds_of_one_recipe_are_not_ranked_against_each_other(service: Service, rank: bool) -> None:
    """Two seeds of the best recipe 0.03 apart (seed noise on a real grid is 0.02-0.04) both keep running; the other
    recipe's seeds are stopped by them. ``rank_replicates: true`` ranks the seeds as the decisions did before."""
    exp_id, ids = _seeded_grid(service, 0.62, rank_replicates=rank)
    recs = _recs(service, exp_id)
    best, twin = ids["batch.prompts=32,seed=0"], ids["batch.prompts=32,seed=1"]
    assert recs[best]["rule"] == "leader"
    assert (recs[twin]["action"] == "stop") is rank, recs[twin]["reason"]
    for name in ("batch.prompts=48,seed=0", "batch.prompts=48,seed=1"):
        assert recs[ids[name]]["action"] == "stop" and recs[ids[name]]["rule"] in ("dominated", "behind")


def test_runs_without_a_seed_are_never_taken_for_replicates(service: Service) -> None:
    """An external trainer registers two runs with the same preset and no seed: they are compared as usual."""
    exp = service.client.post(
        "/api/v1/experiments", json=sweep_doc(policy={"mode": "recommend"}), headers=service.write
    ).json()
    ids = []
    for name, a in (("ext-a", 0.65), ("ext-b", 0.45)):
        body = {"name": name, "experiment_id": exp["id"], "preset": "scalerl", "budget": 8000.0}
        run = service.client.post("/api/v1/runs", json=body, headers=service.write)
        assert run.status_code in (200, 201), run.text
        ids.append(run.json()["id"])
        points = curve_points(A=a, n=40, seed=ids[-1])
        assert service.client.post(f"/api/v1/runs/{ids[-1]}/metrics", json={"points": points}, headers=service.write)
    recs = _recs(service, exp["id"])
    assert recs[ids[1]]["action"] == "stop", recs[ids[1]]["reason"]


def test_verdict_of_a_seeded_grid_compares_recipes_not_seeds(service: Service) -> None:
    """The best recipe's two seeds are 0.01 apart (undecidable noise); the verdict's runner-up is the other recipe, so
    a seeded grid is decided instead of waiting on a coin flip between seeds."""
    exp_id, _ = _seeded_grid(service, 0.64)
    service.drain()
    v = service.client.get(f"/api/v1/experiments/{exp_id}/verdict", headers=service.read).json()
    assert v["best_run_name"].startswith("batch.prompts=32") and v["runner_up_name"].startswith("batch.prompts=48")
    assert v["decided"] is True and v["confidence"] >= 0.9, v["reason"]
    assert len(v["ranking"]) == 4 and v["ranking"][1]["run_name"].startswith("batch.prompts=32")  # seeds still ranked


def test_auto_stop_resumes_only_the_runs_it_stopped(service: Service) -> None:
    """Freeze-thaw under auto_stop: the stop it made is remembered by rule; a resume requeues that run only."""
    from rl_core.scaling import GridRun, Recommendation
    from rl_core.scaling.decide.grid_decisions import GridAssessment, assess_grid
    from server.assess import deciding
    from server.assess.gather import gather
    from server.assess.recommending import advise
    from server.assess.runread import auto_resumes, auto_stop_rule
    from server.lifecycle.spec import ExperimentSpec
    from server.store.models import Experiment, Run

    exp_id, hi, lo = _two_runs(service, "auto_stop")
    service.drain()
    ack = {"status": "stopped", "reason": "checkpointed and exited"}
    assert service.client.post(f"/api/v1/runs/{lo}/status", json=ack, headers=service.write).is_success
    user = service.client.post(f"/api/v1/runs/{hi}/stop", json={"reason": "by hand"}, headers=service.write)
    assert user.is_success
    assert service.client.post(f"/api/v1/runs/{hi}/status", json=ack, headers=service.write).is_success
    with service.ctx.sessions.begin() as session:
        lo_run, hi_run = session.get(Run, lo), session.get(Run, hi)
        assert lo_run is not None and hi_run is not None
        # the rule is read back from the reason the stop stored, for whichever grid rule fired
        assert auto_stop_rule(session, lo_run) in ("dominated", "behind")
        assert auto_stop_rule(session, hi_run) is None  # a user's stop is never undone by the policy
        experiment = session.get(Experiment, exp_id)
        assert experiment is not None
        resume = [
            (run, Recommendation(str(run.id), "resume", "resume: test", {"p_above_leader": 0.7}, "resume"))
            for run in (lo_run, hi_run)
        ]
        advise(session, ExperimentSpec.of(experiment), resume)
    lo_out = service.client.get(f"/api/v1/runs/{lo}", headers=service.read).json()
    assert lo_out["status"] == "queued" and lo_out["status_reason"] == "auto_resume: resume: test"
    assert service.client.get(f"/api/v1/runs/{hi}", headers=service.read).json()["status"] == "stopped"
    # the resume advice is shown for a stopped run (it is the one advice a finished run gets)
    stored = service.client.get(f"/api/v1/experiments/{exp_id}/recommendations", headers=service.read).json()
    assert {r["run_id"]: r["action"] for r in stored["recommendations"]}.get(hi) == "resume"
    assert service.client.post(f"/api/v1/runs/{hi}/resume", headers=service.write).is_success  # a user's resume
    with service.ctx.sessions.begin() as session:
        experiment = session.get(Experiment, exp_id)
        assert experiment is not None
        assert auto_resumes(session, experiment.id) == {lo: 1}  # what max_resumes bounds: the policy's own resumes
        seen: list[GridRun] = []

        def spy(runs: list[GridRun], *args: object) -> GridAssessment:
            seen.extend(runs)
            return assess_grid(runs, *args)  # type: ignore[arg-type]

        with pytest.MonkeyPatch.context() as m:
            m.setattr(deciding, "assess_grid", spy)
            deciding.decide(gather(session, ExperimentSpec.of(experiment), service.ctx.cache))
        assert {int(r.run_id): r.resumes for r in seen} == {hi: 0, lo: 1}  # the decision sees the count


@pytest.mark.parametrize("flat", [False, True])
def test_resume_p_must_stay_apart_from_p_stop(service: Service, flat: bool) -> None:
    """The resume rule's numbers against the stop's, in a nested document or with the old flat names."""
    resume = {"p_resume": 0.05} if flat else {"resume": {"p": 0.05}}
    doc = sweep_doc(name="bad-resume", policy={"mode": "auto_stop", "p_stop": 0.9, **resume})
    r = service.client.post("/api/v1/experiments", json=doc, headers=service.write)
    assert r.status_code == 422 and "resume.p" in r.text and "p_resume" in r.text and "1 - p_stop" in r.text
    gain = {"resume_gain": 0.01} if flat else {"resume": {"gain": 0.01}}
    doc = sweep_doc(name="bad-gain", policy={"mode": "auto_stop", "min_expected_gain": 0.02, **gain})
    r = service.client.post("/api/v1/experiments", json=doc, headers=service.write)
    assert r.status_code == 422 and "resume.gain" in r.text and "min_expected_gain" in r.text


def test_a_finished_run_keeps_only_the_resume_advice() -> None:
    """A stopped run gets no stop/continue advice any more, but ``resume`` and ``resume_limit`` stay visible."""
    from server.assess.advice import for_unfinished

    body = [
        {"run_id": 1, "action": "stop", "rule": "dominated"},
        {"run_id": 1, "action": "resume", "rule": "resume"},
        {"run_id": 1, "action": "stop", "rule": "resume_limit"},
        {"run_id": 1, "action": "continue", "rule": "resume_pending"},
        {"run_id": 2, "action": "continue", "rule": "leader"},
    ]
    assert [(r["run_id"], r["rule"]) for r in for_unfinished(body, {1})] == [
        (1, "resume"),
        (1, "resume_limit"),
        (2, "leader"),
    ]


def test_reach_far_beyond_the_budget_says_it_is_an_extrapolation(service: Service) -> None:
    from server.assess.eta import beyond_budget

    assert beyond_budget(0.4, 0.05, "gpu_hours") is None  # within 10× the budget: a plain number
    assert beyond_budget(float("inf"), 0.05, "gpu_hours") is None and beyond_budget(5.0, None, "gpu_hours") is None
    warning = beyond_budget(2538.0, 0.05, "gpu_hours")
    assert warning is not None and warning.startswith("far beyond this run's budget of 0.05 gpu_hours")
    assert "extrapolation" in warning
    exp = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name="short-budget", budget=400.0), headers=service.write
    ).json()
    run_id = exp["runs"][0]["id"]
    points = curve_points(A=0.7, B=1.2, C_mid=300.0, n=30, c_max=400.0, seed=5)
    assert service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}, headers=service.write)
    service.drain()
    near = service.client.get(f"/api/v1/runs/{run_id}/reach", params={"target": 0.5}, headers=service.read).json()
    assert near["compute"] is not None and near["compute"] < 4000 and near["extrapolation"] is None, near
    far = service.client.get(f"/api/v1/runs/{run_id}/reach", params={"target": 0.69}, headers=service.read).json()
    assert far["compute"] is not None and far["compute"] > 4000, far
    assert far["extrapolation"] is not None and far["extrapolation"] in far["reason"]
    assert "far beyond this run's budget of 400 gpu_hours" in far["extrapolation"]
