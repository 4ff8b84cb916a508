"""The CI verdict of a grid whose runs have all finished: still the decision's leader, still decided."""

from __future__ import annotations

from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc


def test_a_finished_grid_keeps_its_decided_verdict(service: Service) -> None:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    hi, lo = exp["runs"][0]["id"], exp["runs"][1]["id"]
    for run_id, a in ((hi, 0.66), (lo, 0.46)):
        r = service.client.post(
            f"/api/v1/runs/{run_id}/metrics",
            json={"points": curve_points(A=a, n=40, seed=run_id)},
            headers=service.write,
        )
        assert r.status_code == 200, r.text
    service.drain()
    running = service.client.get(f"/api/v1/experiments/{exp['id']}/verdict", headers=service.read).json()
    assert running["decided"] is True and running["best_run_id"] == hi
    for run_id in (hi, lo):
        done = service.client.post(
            f"/api/v1/runs/{run_id}/status",
            json={"status": "succeeded", "reason": "budget reached"},
            headers=service.write,
        )
        assert done.status_code == 200, done.text
    pending = service.client.get(f"/api/v1/experiments/{exp['id']}/assessment", headers=service.read).json()
    assert pending["pending"] is True  # statuses changed since: reading it schedules a new assessment
    service.drain()
    v = service.client.get(f"/api/v1/experiments/{exp['id']}/verdict", headers=service.read).json()
    assert v["finished"] is True
    assert v["decided"] is True and v["best_run_id"] == hi and v["runner_up_id"] == lo, v
