"""The scorecard's moments and numbers: what :func:`new_moments` records from each stored assessment, and what
:func:`build_scorecard` makes of them (pure); then the REST answer on a real database, against what was stored."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from server.assess.moments import Moment, new_moments
from server.assess.schemas import AssessmentOut, ComparisonOut, RunAssessment
from server.assess.scorecard import build_scorecard, verdict_history
from server.assess.verdict import undecided
from server.store.models import AssessmentMoment
from tests.server.conftest import Service
from tests.server.helpers import curve_points, finish_run, post_points, sweep_doc


def _run(rid: int, used: float, status: str = "running", value: float | None = 0.6, **kw: Any) -> RunAssessment:
    base: dict[str, Any] = dict(
        id=rid,
        name=f"r{rid}",
        status=status,
        budget=1000.0,
        compute_used=used,
        n_points=5,
        fit_status="ok",
        fit_message="",
        level=0.8,
        V_budget=value,
        V_lo=None if value is None else value - 0.05,
        V_hi=None if value is None else value + 0.05,
        action="continue",
        rule="",
        reason="",
        numbers={},
    )
    return RunAssessment(**{**base, **kw})


def _assessment(version: int, runs: list[RunAssessment], best: int | None = None, policy: str = "recommend") -> Any:
    v = undecided(1, "", all(r.status not in ("running", "queued", "stopping") for r in runs))
    if best is not None:
        v = v.model_copy(update={"decided": True, "best_run_id": best, "best_run_name": f"r{best}"})
    return AssessmentOut(
        experiment_id=1,
        version=version,
        computed_at=None,
        state="",
        compute_unit="gpu_hours",
        fit="",
        policy=policy,
        runs=runs,
        verdict=v,
        comparison=ComparisonOut(
            experiment_id=1,
            reference_id=None,
            reference_name=None,
            reference_kind="none",
            margin=0.02,
            rows=[],
            skipped=0,
        ),
        counts={},
    )


def _replay(assessments: list[AssessmentOut]) -> list[Moment]:
    """The moments of a sequence of stored assessments, as store_assessment records them."""
    recorded: list[Moment] = []
    for a in assessments:
        recorded += new_moments(a, recorded)
    return recorded


def test_the_verdict_is_recorded_when_first_decided_and_at_each_change_only() -> None:
    steps = [
        _assessment(1, [_run(1, 100), _run(2, 100)]),  # undecided from the start: nothing
        _assessment(2, [_run(1, 200), _run(2, 200)], best=1),  # first decided
        _assessment(3, [_run(1, 300), _run(2, 300)], best=1),  # the same: nothing
        _assessment(4, [_run(1, 400), _run(2, 400)], best=2),  # another best
        _assessment(5, [_run(1, 500), _run(2, 500)]),  # undecided again
        _assessment(6, [_run(1, 600), _run(2, 600)]),  # still undecided: nothing
    ]
    verdicts = [m for m in _replay(steps) if m.kind == "verdict"]
    assert [(m.version, m.body["decided"], m.body["best_run_id"]) for m in verdicts] == [
        (2, True, 1),
        (4, True, 2),
        (5, False, None),
    ]
    assert verdicts[0].body["spent"] == 400.0 and verdicts[0].body["share"] == pytest.approx(0.2)
    first, changes = verdict_history(verdicts)
    assert first is not None and first.best_run_name == "r1" and first.share_of_budget == pytest.approx(0.2)
    assert [(c.decided, c.best_run_name) for c in changes] == [(True, "r2"), (False, None)]
    assert new_moments(steps[-1], _replay(steps)) == []  # storing the last one again adds nothing


def test_forecasts_are_kept_once_at_30_and_50_percent_while_they_are_forecasts() -> None:
    observed = _run(1, 1000, numbers={"observed": 1.0}, value=0.7)
    steps = [
        _assessment(1, [_run(1, 200, value=0.5)]),
        _assessment(2, [_run(1, 350, value=0.55)]),  # 35%: the 30% forecast
        _assessment(3, [_run(1, 400, value=0.58)]),
        _assessment(4, [_run(1, 700, value=0.66)]),  # 70%: the 50% forecast (its share says where it was)
        _assessment(5, [observed]),
    ]
    kept = [(m.body["milestone"], m.body["share"], m.body["value"], m.version) for m in _replay(steps)]
    assert kept == [(0.3, 0.35, 0.55, 2), (0.5, 0.7, 0.66, 4)]
    # a run first seen with its value already observed has no forecast to keep
    assert _replay([_assessment(1, [observed])]) == []


def test_a_stop_is_recorded_once_with_its_forecast_and_again_after_a_resume() -> None:
    steps = [
        _assessment(1, [_run(1, 300, value=0.4)]),
        _assessment(2, [_run(1, 400, value=0.41, action="stop")], policy="auto_stop"),  # auto_stop stops it now
        _assessment(3, [_run(1, 420, status="stopping", value=0.41)], policy="auto_stop"),
        _assessment(4, [_run(1, 420, status="stopped", value=0.41)], policy="auto_stop"),
        _assessment(5, [_run(1, 420, status="queued", value=0.5)], policy="auto_stop"),  # resumed
        _assessment(6, [_run(1, 600, status="stopped", value=0.45)], policy="auto_stop"),
    ]
    moves = [(m.kind, m.version, m.body["value"]) for m in _replay(steps) if m.kind in ("stop", "resume")]
    assert moves == [("stop", 2, 0.41), ("resume", 5, 0.5), ("stop", 6, 0.45)]
    # under recommend, advice to stop is not a stop
    assert [m.kind for m in _replay([_assessment(1, [_run(1, 400, action="stop")])])] == ["forecast"]


def test_the_scorecard_grades_stops_and_early_forecasts_from_the_moments() -> None:
    steps = [
        _assessment(1, [_run(1, 300, value=0.60), _run(2, 300, value=0.30)]),
        _assessment(2, [_run(1, 500, value=0.66), _run(2, 400, status="stopping", value=0.32)], best=1),
    ]
    moments = _replay(steps)
    for m in moments:  # store_assessment adds what the run had shown with a stop
        if m.kind == "stop":
            m.body["last_value"] = 0.29
    final = _run(1, 1000, status="succeeded", value=0.70, numbers={"observed": 1.0})
    last = _assessment(3, [final, _run(2, 400, status="stopped", value=0.32)], best=1)
    card = build_scorecard(last, moments + new_moments(last, moments), {"early_stop_recommended": 1})
    assert (card.budget, card.compute_used, card.saved) == (2000.0, 1400.0, 600.0)
    assert card.saved_share == pytest.approx(0.3)
    assert card.first_decided is not None and card.first_decided.share_of_budget == pytest.approx(0.45)
    assert card.changes == [] and card.decided and card.best_run_name == "r1"
    one, two = card.runs
    assert one.saved == 0.0 and one.final_value == 0.70
    assert [(f.milestone, f.value) for f in one.early] == [(0.3, 0.60), (0.5, 0.66)]
    assert one.early[0].error == pytest.approx(-0.10) and one.early[0].inside is False
    assert one.early[1].error == pytest.approx(-0.04) and one.early[1].inside is True
    assert two.saved == 600.0 and two.last_value == 0.29
    assert two.stop_forecast is not None and (two.stop_forecast.value, two.stop_forecast.share) == (0.32, 0.4)
    assert card.alerts == {"early_stop_recommended": 1}
    assert card.summary == (
        "stops saved 600 of 2,000 gpu_hours (30%); decided at 45% of the budget (r1), unchanged since"
    )


def test_the_rest_scorecard_reads_what_was_stored(service: Service) -> None:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(name="scorecard-rest"), headers=service.write)
    assert exp.status_code == 201, exp.text
    exp_id, (best, low) = exp.json()["id"], [r["id"] for r in exp.json()["runs"]]
    points = {best: curve_points(A=0.8, C_mid=2000.0, n=24, seed=1), low: curve_points(A=0.35, n=24, seed=2)}
    post_points(service, best, points[best][:6])
    post_points(service, low, points[low][:6])
    service.drain()
    r = service.client.post(f"/api/v1/runs/{low}/stop", json={"reason": "behind"}, headers=service.write)
    assert r.status_code == 200, r.text
    post_points(service, best, points[best][6:])
    finish_run(service, best)
    for _ in range(3):
        a = service.client.get(f"/api/v1/experiments/{exp_id}/assessment", headers=service.read).json()
        if not a["pending"]:
            break
        service.drain()
    assert not a["pending"], a["verdict"]
    card = service.client.get(f"/api/v1/experiments/{exp_id}/scorecard", headers=service.read).json()
    assert card["assessment_version"] == a["version"] and card["compute_unit"] == "gpu_hours"
    used = {e["id"]: e["compute_used"] for e in a["runs"]}
    assert card["budget"] == 16000.0 and card["compute_used"] == pytest.approx(sum(used.values()))
    grades = {g["run_id"]: g for g in card["runs"]}
    assert grades[low]["status"] in ("stopping", "stopped")
    assert card["saved"] == pytest.approx(8000.0 - used[low]) == grades[low]["saved"]
    assert grades[low]["last_value"] == points[low][5]["pass_rate"]  # what it had shown at the stop
    assert grades[best]["final_value"] == next(e["V_budget"] for e in a["runs"] if e["id"] == best)
    with service.ctx.sessions() as session:
        kinds = session.scalars(
            select(AssessmentMoment.kind).where(AssessmentMoment.experiment_id == exp_id).order_by(AssessmentMoment.id)
        ).all()
    assert "stop" in kinds and kinds.count("stop") == 1
    assert card["summary"].startswith(f"stops saved {8000.0 - used[low]:,.0f} of 16,000 gpu_hours")
    missing = service.client.get("/api/v1/experiments/999999/scorecard", headers=service.read)
    assert missing.status_code == 404
    assert service.client.get(f"/api/v1/experiments/{exp_id}/scorecard").status_code == 401
