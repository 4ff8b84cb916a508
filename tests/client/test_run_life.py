"""A run's whole life for your own trainer, against a live service: a name that exists (resume policies),
a trainer that goes silent (lost, with an alert, and back), the forecast right after finish(), the run's
description, and a policy set on an own-runs experiment at creation and later."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from rl_core.scaling import sigmoid
from scalerl.client import ApiError, Client, Reporter
from scalerl.client.api import Point
from server.lifecycle.runs import reap_silent
from server.store.alert_models import Alert
from server.store.models import Run, utcnow
from tests.client.conftest import Service


def _curve(n: int = 48, A: float = 0.8, seed: int = 0) -> list[tuple[int, float, float]]:
    rng = np.random.default_rng(seed)
    c = np.linspace(50.0, 4000.0, n)
    y = np.clip(sigmoid(c, R0=0.05, A=A, B=1.6, C_mid=800.0) + rng.normal(0, 0.01, n), 0, 1)
    return [(i + 1, float(ci), float(yi)) for i, (ci, yi) in enumerate(zip(c, y, strict=True))]


def test_a_finished_name_starts_a_new_run_by_default(service: Service) -> None:
    with Client(service.url, service.token) as api:
        first = api.register_run("grpo", experiment="life")
        assert first.name == "grpo"
        assert api.register_run("grpo", experiment="life").id == first.id  # live: a restarted trainer continues
        api.report_status(first.id, "running", "started")
        api.report_status(first.id, "succeeded", "done")
        second = api.register_run("grpo", experiment="life")  # ended: a new run, as W&B starts one
        assert second.id != first.id and second.name == "grpo-2" and second.action == "continue"
        third = api.register_run("grpo", experiment="life")  # grpo-2 is live: grpo is still the ended one
        assert third.name == "grpo-3"
        # allow: the ended run itself, reopened (queued; its next points start it again)
        again = api.register_run("grpo", experiment="life", resume="allow")
        assert again.id == first.id and again.status == "queued" and again.action == "continue"
        with pytest.raises(ApiError) as never:
            api.register_run("grpo", experiment="life", resume="never")
        assert never.value.status_code == 409 and "resume='allow'" in str(never.value)
        with pytest.raises(ApiError) as must:
            api.register_run("nobody", experiment="life", resume="must")
        assert must.value.status_code == 404
        with pytest.raises(ValueError, match="resume must be one of"):
            api.register_run("grpo", experiment="life", resume="sometimes")  # type: ignore[arg-type]


def test_reporter_rerun_after_finish_trains_on_a_new_run(service: Service) -> None:
    """The first harm of the issue: a script run again under a finished run's name was told to stop at once."""
    points = _curve(12)
    with Reporter.start("rerun", url=service.url, token=service.token, experiment="rerun-exp") as rep:
        for step, c, y in points:
            rep.log(step, c, y)
    assert rep.status == "succeeded"
    again = Reporter.start("rerun", url=service.url, token=service.token, experiment="rerun-exp")
    for step, c, y in points:
        assert again.log(step, c, y) == "continue"
    assert again.flush(20)
    assert again.name == "rerun-2" and not again.should_stop
    assert again.finish() and again.status == "succeeded"


def test_a_silent_trainer_becomes_lost_with_an_alert_and_comes_back(service: Service) -> None:
    with Client(service.url, service.token) as api:
        run = api.register_run("silent", experiment="life", heartbeat_seconds=10)
        api.post_points(run.id, [Point.make(1, 1.0, 0.1)])
        assert api.heartbeat(run.id, 10).status == "running"
        sessions = service.ctx.sessions
        with sessions.begin() as session:  # nothing happens before 6 heartbeats are missed
            assert reap_silent(session, 6.0) == []
            row = session.get(Run, run.id)
            assert row is not None
            row.last_seen_at = utcnow() - timedelta(seconds=61)
        with sessions.begin() as session:
            assert reap_silent(session, 6.0) == [run.id]
        info = api.run_info(run.id)
        assert info.status == "lost" and info.action == "stop"
        with sessions() as session:
            alerts = session.query(Alert).filter(Alert.run_id == run.id).all()
            assert [a.type for a in alerts] == ["run_lost"] and "went silent" in alerts[0].title
        back = api.post_points(run.id, [Point.make(2, 2.0, 0.2)])  # it reports again: running, told to continue
        assert back.status == "running" and back.action == "continue"
        # a worker's leased run, or an ended one, has no lease-free heartbeat
        api.report_status(run.id, "succeeded", "done")
        with pytest.raises(ApiError) as ended:
            api.heartbeat(run.id)
        assert ended.value.status_code == 409


def test_forecast_after_finish_is_the_fit_of_every_point(service: Service) -> None:
    """Item 3: right after finish() the forecast was a stale fit with intervals of 4 points."""
    points = _curve(48, A=0.8)
    rep = Reporter.start("fresh", url=service.url, token=service.token, experiment="fresh-exp", flush_interval=0.2)
    for step, c, y in points[:6]:
        rep.log(step, c, y)
    assert rep.flush(20)
    assert service.ctx.drain(60)  # the fits with intervals of the first 6 points are stored
    for step, c, y in points[6:]:
        rep.log(step, c, y)
    assert rep.finish()
    fc = rep.forecast(wait=30)
    assert fc is not None and fc.n_points > 30, fc  # all 48 points (after the burn-in), not the first 6
    assert fc.A is not None and abs(fc.A - 0.8) < 0.1


def test_run_description_config_tags_notes(service: Service) -> None:
    with Client(service.url, service.token) as api:
        run = api.register_run(
            "described", experiment="life", config={"lr": 1e-6, "beta": 0.0, "loss": "cispo"}, tags=["ablation"]
        )
        got = api.get_run(run.id)
        assert got["config"] == {"lr": 1e-6, "beta": 0.0, "loss": "cispo"} and got["tags"] == ["ablation"]
        changed = api.update_run(run.id, config={"beta": None, "lr": 2e-6}, notes="lr doubled")
        assert changed["config"] == {"lr": 2e-6, "loss": "cispo"} and changed["notes"] == "lr doubled"
        summed = api.update_run(run.id, summary={"best_pass_rate": 0.71, "diverged": False})
        assert summed["summary"] == {"best_pass_rate": 0.71, "diverged": False} and summed["tags"] == ["ablation"]
        with pytest.raises(ApiError) as bad:
            api.update_run(run.id, config={"lr": [1, 2]})
        assert bad.value.status_code == 422
        assert api.get_run(run.id)["config"] == {"lr": 2e-6, "loss": "cispo"}  # nothing stored was lost


def test_policy_on_an_own_runs_experiment_at_creation_and_later(service: Service) -> None:
    with service.http() as http:
        created = http.post(
            "/api/v1/experiments/tracking", json={"name": "auto", "policy": {"mode": "auto_stop", "min_gain": 0.05}}
        )
        assert created.status_code == 201, created.text
        exp = created.json()
        assert exp["policy"] == "auto_stop" and exp["document"]["policy"] == {"mode": "auto_stop", "min_gain": 0.05}
        bad = http.post("/api/v1/experiments/tracking", json={"name": "auto2", "policy": {"mode": "sometimes"}})
        assert bad.status_code == 422
        back = http.put(f"/api/v1/experiments/{exp['id']}/policy", json={"mode": "recommend"})
        assert back.status_code == 200 and back.json()["policy"] == "recommend"
        refused = http.put(f"/api/v1/experiments/{exp['id']}/policy", json={"p_stop": 2})
        assert refused.status_code == 422 and "p_stop" in refused.text
        assert http.get(f"/api/v1/experiments/{exp['id']}").json()["policy"] == "recommend"
        assert http.put("/api/v1/experiments/999999/policy", json={}).status_code == 404


def test_names_resolve_across_experiments_when_unique(service: Service) -> None:
    with Client(service.url, service.token) as api:
        api.register_run("only-here", experiment="one")
        found = api.find_run_by_name("only-here")
        assert found is not None and found.name == "only-here"
        api.register_run("twice", experiment="one")
        api.register_run("twice", experiment="two")
        with pytest.raises(Exception, match="2 experiments have a run named 'twice'"):
            api.find_run_by_name("twice")


def test_an_evaluation_sent_after_its_steps_training_point_is_stored(service: Service) -> None:
    """Item 8: a resume with eval_on_start (or an evaluation that finished after the step's point left) lost the
    evaluation: "step N is already stored with other values"."""
    with Client(service.url, service.token) as api:
        run = api.register_run("late-eval", experiment="life")
        api.post_points(
            run.id, [Point.make(s, float(s), 0.1 * s if s <= 2 else None, {"loss": 1.0 / s}) for s in (1, 2, 3, 4)]
        )
        late = api.post_points(run.id, [Point.make(4, 4.0, 0.4, {"eval_reward": 0.4})])
        assert (late.accepted, late.rejected) == (1, ()), late
        stored = {p["step"]: p for p in api.get_points(run.id)}
        assert stored[4]["pass_rate"] == 0.4 and stored[4]["metrics"] == {"loss": 0.25, "eval_reward": 0.4}
        # an evaluation that would land before the curve's last evaluation, or that changes a stored value: refused
        before = api.post_points(run.id, [Point.make(3, 3.0, 0.3)])
        assert before.accepted == 0 and "already stored with other values" in str(before.rejected[0])
        other = api.post_points(run.id, [Point.make(4, 4.5, 0.5)])
        assert other.accepted == 0 and other.rejected
        assert api.post_points(run.id, [Point.make(4, 4.0, 0.4, {"eval_reward": 0.4})]).duplicates == 1
        assert service.ctx.drain(30)
        fc = api.forecast(run.id)
        assert fc is not None and fc.n_points >= 3  # the fit reads steps 1, 2 and the late 4


def test_comparison_cards_tell_own_runs_apart_by_their_config(service: Service) -> None:
    """Item 8: an own-runs experiment's card said "(same recipe)" for runs that differ in their config."""
    with Client(service.url, service.token) as api:
        for lr, A, seed in ((1e-6, 0.8, 0), (3e-6, 0.6, 1)):
            run = api.register_run(f"lr-{lr:g}", experiment="configs", config={"lr": lr, "loss": "cispo"})
            api.post_points(run.id, [Point.make(s, c, y) for s, c, y in _curve(40, A=A, seed=seed)])
            api.report_status(run.id, "succeeded", "done")
        assert service.ctx.drain(120)
        exp = api.find_experiment("configs")
        assert exp is not None
        card = api.request("GET", f"/api/v1/dashboard/experiments/{exp['id']}/comparison")
        changes = [row["changes"] for row in card["rows"]]
        assert changes and all(c == {"config.lr": 3e-6} for c in changes if c), card
        assert {"config.lr": 3e-6} in changes


def test_last_error_does_not_survive_a_successful_finish(service: Service) -> None:
    """Item 8: ``Reporter.last_error`` still held an earlier problem after a finish() that succeeded."""
    rep = Reporter.start("errs", url=service.url, token=service.token, experiment="life", flush_interval=0.1)
    rep.log(1, 1.0, 0.1)
    assert rep.flush(20)
    rep.log(1, 2.0, 0.2)  # the same step with other values: rejected by the service
    assert rep.flush(20)
    assert rep.last_error is not None and "rejected" in rep.last_error
    assert rep.finish() and rep.last_error is None
