"""The answer users read: the verdict names the run that really ended best, finished runs get no advice,
their advice alerts are withdrawn, the card's words follow its numbers, and every surface shows one value at the
budget."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from server.store.alert_models import Alert
from tests.server.conftest import Service
from tests.server.helpers import curve_points, finish_run, post_points, sweep_doc


def _assessed(service: Service, exp_id: int) -> dict[str, Any]:
    """The experiment's assessment once it is current (a read schedules the new one; then wait for it)."""
    for _ in range(3):
        a = service.client.get(f"/api/v1/experiments/{exp_id}/assessment", headers=service.read).json()
        if not a.get("pending") and a["version"] > 0:
            return dict(a)
        service.drain()
    raise AssertionError(f"the assessment stayed pending: {a}")


def _steep_and_flat(service: Service) -> tuple[int, int, int]:
    """Two runs to their budget: ``steep`` still rising at the budget (its ceiling is not identified) ends highest;
    ``flat`` saturated early, 0.045 lower."""
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(name="right-answer"), headers=service.write).json()
    steep, flat = exp["runs"][0]["id"], exp["runs"][1]["id"]
    post_points(service, steep, curve_points(A=0.98, B=1.5, C_mid=12000.0, R0=0.1, n=30, seed=1))
    post_points(service, flat, curve_points(A=0.36, B=1.8, C_mid=1500.0, R0=0.1, n=30, seed=2))
    return exp["id"], steep, flat


def test_a_finished_grid_names_the_run_that_ended_best_by_observation(service: Service) -> None:
    exp_id, steep, flat = _steep_and_flat(service)
    for run_id in (steep, flat):
        finish_run(service, run_id)
    a = _assessed(service, exp_id)
    v = a["verdict"]
    assert v["finished"] and v["best_run_id"] == steep and v["runner_up_id"] == flat, v
    assert v["decided"] is True and v["basis"] == "observed", v
    assert v["difference_at_budget"] > 0.02 and "ended at" in v["reason"]
    # finished runs get no advice anywhere, the leader stays named
    table = {e["id"]: e for e in a["runs"]}
    assert {e["action"] for e in a["runs"]} == {"none"}
    assert {r["action"] for r in v["ranking"]} == {"none"}
    assert table[steep]["rule"] == "leader" and table[steep]["numbers"]["observed"] == 1.0
    # one value at the budget: table, verdict ranking and GET /runs/{id}
    ranked = {r["run_id"]: r for r in v["ranking"]}
    for run_id in (steep, flat):
        e = table[run_id]
        assert ranked[run_id]["V_budget"] == e["V_budget"] and ranked[run_id]["observed"] is True
        detail = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()
        at = detail["at_budget"]
        assert (at["value"], at["lo"], at["hi"]) == (e["V_budget"], e["V_lo"], e["V_hi"]), (at, e)
        assert at["observed"] is True and at["assessment_version"] == a["version"]
        assert e["extrapolation"] is None and e["band"] is None  # an observed value has no forecast past the data
    # the CLI gate reads the same verdict: decided
    gate = service.client.get(f"/api/v1/experiments/{exp_id}/verdict", headers=service.read).json()
    assert gate["decided"] is True and gate["best_run_id"] == steep


def test_a_run_still_training_is_ranked_by_its_forecast_and_the_best_is_never_below_the_runner_up(
    service: Service,
) -> None:
    exp_id, steep, _ = _steep_and_flat(service)
    service.drain()
    v = _assessed(service, exp_id)["verdict"]
    # the points reach the budget (8000): observed even though the runs are still running
    assert v["basis"] == "observed" and v["best_run_id"] == steep
    values = [r["V_budget"] for r in v["ranking"] if r["V_budget"] is not None]
    assert values == sorted(values, reverse=True) and v["difference_at_budget"] >= 0


def test_advice_alerts_are_withdrawn_when_their_run_finishes(service: Service) -> None:
    from server.alerts.hooks import _on_recommendations
    from server.lifecycle.runs import transition
    from server.store.models import RecommendationSnapshot, Run

    exp = service.client.post("/api/v1/experiments", json=sweep_doc(name="alerts-end"), headers=service.write).json()
    run_id = exp["runs"][0]["id"]
    with service.ctx.sessions.begin() as session:  # one transaction: no assessment can withdraw it in between
        run = session.get(Run, run_id)
        assert run is not None
        transition(session, run, "running", "claimed", "test")
        body = [{"run_id": run_id, "run_name": "x", "action": "scale", "rule": "scale", "reason": "2x", "numbers": {}}]
        _on_recommendations(session, RecommendationSnapshot(experiment_id=exp["id"], body=body))
        session.flush()
        assert session.scalars(select(Alert).where(Alert.run_id == run_id)).one().resolved_at is None
        transition(session, run, "succeeded", "budget reached", "test")
    with service.ctx.sessions() as session:
        alert = session.scalars(select(Alert).where(Alert.run_id == run_id, Alert.type == "scale_recommended")).one()
        assert alert.resolved_at is not None
        assert alert.resolution == "the run has succeeded: the advice no longer applies"


def test_the_card_says_not_shown_to_differ_where_the_probability_does_not_support_a_gap() -> None:
    import numpy as np

    from rl_core.scaling import fit_curve
    from rl_core.scaling.fit.model import sigmoid
    from server.assess.ceiling_card import _row
    from server.assess.schemas import RunAssessment
    from server.store.models import Run

    x = np.linspace(200, 8000, 12)
    rng = np.random.default_rng(0)  # noisy enough that a gap of 0.09 in the medians is not backed (P = 0.70)
    fits = {
        1: fit_curve(x, np.clip(sigmoid(x, R0=0.1, A=0.66, B=1.6, C_mid=2500) + rng.normal(0, 0.03, x.size), 0, 1)),
        2: fit_curve(x, np.clip(sigmoid(x, R0=0.1, A=0.62, B=1.6, C_mid=2500) + rng.normal(0, 0.03, x.size), 0, 1)),
    }

    def entry(i: int) -> RunAssessment:
        from rl_core.scaling.fit.summary import summarize

        s = summarize(fits[i], 1.0)  # identified for the card's purpose
        return RunAssessment.model_validate(
            {
                "id": i,
                "name": f"r{i}",
                "status": "succeeded",
                "budget": 8000.0,
                "compute_used": 8000.0,
                "n_points": 12,
                "fit_status": fits[i].status,
                "fit_message": "",
                "level": 0.8,
                "prior": None,
                "A": s.value("A"),
                "B": s.value("B"),
                "C_mid": s.value("C_mid"),
                "ceiling_identified": True,
                "action": "none",
                "rule": "",
                "reason": "",
                "numbers": {},
            }
        )

    runs = {i: Run(id=i, name=f"r{i}", experiment_id=1, status="succeeded") for i in (1, 2)}
    table = {i: entry(i) for i in (1, 2)}
    row = _row(runs[1], runs[2], fits, table, 0.02)
    assert row.A_diff is not None and row.probability_higher is not None
    assert abs(row.A_diff) > 0.02 and 0.1 < row.probability_higher < 0.9  # the case: a gap the posterior does not back
    assert row.effect == "not_shown" and "not shown to differ" in row.reason and "within" not in row.reason
