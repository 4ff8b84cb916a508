"""Compute is cumulative: a point whose compute is below an earlier step's (a trainer whose counter restarted after
a resume) or above a later stored step's is refused with the reason, on both databases; the rest of its batch and
everything stored before are kept, and the run's curve never folds back on itself."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import Service


def _register(service: Service, name: str) -> int:
    r = service.client.post("/api/v1/runs", json={"name": name, "budget": 100.0}, headers=service.write)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _post(service: Service, run_id: int, points: list[tuple[int, float]]) -> Any:
    body = {"points": [{"step": s, "compute": c, "pass_rate": 0.1 + 0.001 * s} for s, c in points]}
    r = service.client.post(f"/api/v1/runs/{run_id}/metrics", json=body, headers=service.write)
    return r


def _stored(service: Service, run_id: int) -> list[tuple[int, float]]:
    got = service.client.get(f"/api/v1/runs/{run_id}/metrics", headers=service.read).json()
    return [(p["step"], p["compute"]) for p in got]


def test_a_restarted_compute_counter_is_refused_and_the_curve_stays_monotone(service: Service) -> None:
    run = _register(service, "resumed")
    assert _post(service, run, [(10, 1.0), (20, 2.0), (30, 3.0)]).json()["accepted"] == 3

    # After a resume the trainer's counter restarted at zero: appended steps with less compute than step 30.
    answer = _post(service, run, [(31, 0.05), (32, 0.1), (40, 4.0)]).json()
    assert answer["accepted"] == 1
    errors = {r["step"]: r["errors"][0] for r in answer["rejected"]}
    assert set(errors) == {31, 32}
    assert "compute 0.05 at step 31 is below 3 at an earlier step 30" in errors[31]
    assert "cumulative" in errors[31] and "resume" in errors[31]

    # Inside one batch too: a later step may not have less compute than an earlier one of the same batch.
    answer = _post(service, run, [(50, 5.0), (60, 4.5), (70, 6.0)]).json()
    assert answer["accepted"] == 2 and [r["step"] for r in answer["rejected"]] == [60]
    assert _stored(service, run) == [(10, 1.0), (20, 2.0), (30, 3.0), (40, 4.0), (50, 5.0), (70, 6.0)]


def test_back_filled_steps_must_fit_between_their_stored_neighbours(service: Service) -> None:
    run = _register(service, "backfill")
    assert _post(service, run, [(10, 1.0), (30, 3.0), (50, 5.0)]).json()["accepted"] == 3
    answer = _post(service, run, [(20, 2.0), (40, 6.0), (45, 2.5), (5, 0.5)]).json()
    assert answer["accepted"] == 2  # steps 20 and 5 fit; 40 is above step 50's compute, 45 below step 30's
    errors = {r["step"]: r["errors"][0] for r in answer["rejected"]}
    assert "above 5 at a later step 50" in errors[40]
    assert "below 3 at an earlier step 30" in errors[45]
    assert _stored(service, run) == [(5, 0.5), (10, 1.0), (20, 2.0), (30, 3.0), (50, 5.0)]

    # Equal compute is allowed (a step that trained on nothing, e.g. an evaluation-only step).
    assert _post(service, run, [(60, 5.0), (55, 5.0)]).json()["accepted"] == 2
