"""The status machine, user control, and worker leases (claim, heartbeat, expiry -> lost, attempts)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from server.assess.background import reap_once
from server.lifecycle.runs import reap_expired
from server.store.models import utcnow
from tests.server.conftest import Service, make_settings, start_service
from tests.server.helpers import curve_points, sweep_doc


def _exp(service: Service, **extra: Any) -> dict[str, Any]:
    r = service.client.post("/api/v1/experiments", json=sweep_doc(**extra), headers=service.write)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _get(service: Service, run_id: int) -> dict[str, Any]:
    return dict(service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json())


def test_stop_reaches_the_trainer_through_the_metrics_response(service: Service) -> None:
    c, h = service.client, service.write
    run_id = _exp(service)["runs"][0]["id"]
    pts = curve_points(A=0.6, n=10)
    assert c.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts[:5]}, headers=h).json()["action"] == "continue"
    stopped = c.post(f"/api/v1/runs/{run_id}/stop", json={"reason": "enough"}, headers=h).json()
    assert stopped["status"] == "stopping" and stopped["action"] == "stop"
    again = c.post(f"/api/v1/runs/{run_id}/stop", headers=h)
    assert again.status_code == 200 and again.json()["status"] == "stopping"  # idempotent
    r = c.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts[5:]}, headers=h).json()
    assert r["action"] == "stop" and r["accepted"] == 5  # late points are still kept
    c.post(f"/api/v1/runs/{run_id}/status", json={"status": "stopped", "reason": "trainer exited"}, headers=h)
    run = _get(service, run_id)
    assert run["status"] == "stopped" and run["finished_at"] is not None
    trail = [(t["from_status"], t["to_status"], t["reason"]) for t in run["transitions"]]
    assert trail == [
        (None, "queued", "created"),
        ("queued", "running", "first metrics received"),
        ("running", "stopping", "enough"),
        ("stopping", "stopped", "trainer exited"),
    ]


def test_control_rules(service: Service) -> None:
    c, h = service.client, service.write
    runs = _exp(service)["runs"]
    a, b = runs[0]["id"], runs[1]["id"]
    assert c.post(f"/api/v1/runs/{a}/stop", headers=h).json()["status"] == "stopped"  # queued -> stopped
    r = c.post(f"/api/v1/runs/{a}/retry", headers=h)
    assert r.status_code == 409 and "only failed or lost" in r.json()["detail"]
    assert c.post(f"/api/v1/runs/{a}/resume", headers=h).json()["status"] == "queued"
    r = c.post(f"/api/v1/runs/{b}/status", json={"status": "succeeded", "reason": "x"}, headers=h)
    assert r.status_code == 409 and "allowed from 'queued'" in r.json()["detail"]
    c.post(f"/api/v1/runs/{b}/metrics", json={"points": curve_points(A=0.6, n=5)}, headers=h)
    c.post(f"/api/v1/runs/{b}/status", json={"status": "failed", "reason": "OOM"}, headers=h)
    assert c.post(f"/api/v1/runs/{b}/resume", headers=h).status_code == 409
    assert c.post(f"/api/v1/runs/{b}/retry", headers=h).json()["status"] == "queued"
    r = c.post(f"/api/v1/runs/{b}/budget", json={"budget": 100.0}, headers=h)
    assert r.status_code == 409 and "below the compute already used" in r.json()["detail"]
    r = c.post(f"/api/v1/runs/{b}/budget", json={"budget": 20000.0, "reason": "promising"}, headers=h)
    assert r.json()["budget"] == 20000.0
    nan = c.post(
        f"/api/v1/runs/{b}/budget", content=b'{"budget": NaN}', headers={**h, "Content-Type": "application/json"}
    )
    assert nan.status_code == 422
    assert c.post("/api/v1/runs/777/stop", headers=h).status_code == 404


def test_claim_heartbeat_and_lease_expiry(service: Service) -> None:
    c, h = service.client, service.write
    exp = _exp(service)
    first = c.post("/api/v1/runs/claim", json={"worker": "gpu-0", "lease_seconds": 30}, headers=h)
    second = c.post("/api/v1/runs/claim", json={"worker": "gpu-1"}, headers=h)
    assert first.status_code == second.status_code == 200
    lease = first.json()
    run_id = lease["run"]["id"]
    assert {run_id, second.json()["run"]["id"]} == {r["id"] for r in exp["runs"]}
    assert lease["run"]["status"] == "running" and lease["run"]["attempts"] == 1
    assert c.post("/api/v1/runs/claim", json={"worker": "gpu-2"}, headers=h).status_code == 204

    # Only the lease holder may report.
    pts = {"points": curve_points(A=0.6, n=3)}
    r = c.post(f"/api/v1/runs/{run_id}/metrics", json=pts, headers=h)
    assert r.status_code == 409 and "lease" in r.json()["detail"]
    ok = c.post(f"/api/v1/runs/{run_id}/metrics?lease_id={lease['lease_id']}", json=pts, headers=h)
    assert ok.status_code == 200
    hb = c.post(f"/api/v1/runs/{run_id}/heartbeat", json={"lease_id": lease["lease_id"]}, headers=h).json()
    assert hb["action"] == "continue"
    assert c.post(f"/api/v1/runs/{run_id}/heartbeat", json={"lease_id": "stale"}, headers=h).status_code == 409

    c.post(f"/api/v1/runs/{run_id}/stop", headers=h)
    hb = c.post(f"/api/v1/runs/{run_id}/heartbeat", json={"lease_id": lease["lease_id"]}, headers=h).json()
    assert hb["status"] == "stopping" and hb["action"] == "stop"

    # The lease expires without heartbeats: lost; a retry starts attempt 2.
    with service.ctx.sessions.begin() as session:
        assert reap_expired(session, utcnow() + timedelta(seconds=3600)) == sorted([run_id, second.json()["run"]["id"]])
    assert reap_once(service.ctx.sessions, service.ctx.notifier) == []
    run = _get(service, run_id)
    assert run["status"] == "lost" and "expired" in run["status_reason"] and run["lease_owner"] is None
    c.post(f"/api/v1/runs/{run_id}/retry", headers=h)
    again = c.post("/api/v1/runs/claim", json={"worker": "gpu-3", "experiment_id": exp["id"]}, headers=h).json()
    assert again["run"]["id"] == run_id and again["run"]["attempts"] == 2
    done = c.post(
        f"/api/v1/runs/{run_id}/status",
        json={"status": "succeeded", "reason": "budget reached", "lease_id": again["lease_id"]},
        headers=h,
    ).json()
    assert done["status"] == "succeeded" and done["lease_owner"] is None


def test_list_runs_filters(service: Service) -> None:
    exp = _exp(service)
    c = service.client
    c.post(f"/api/v1/runs/{exp['runs'][0]['id']}/stop", headers=service.write)
    got = c.get(f"/api/v1/runs?experiment_id={exp['id']}&status=stopped", headers=service.read).json()
    assert [r["id"] for r in got] == [exp["runs"][0]["id"]]
    assert c.get("/api/v1/runs?status=bogus", headers=service.read).status_code == 422


def test_the_server_reaps_expired_leases_on_its_own(database_url: str, tmp_path: Path) -> None:
    gen = start_service(make_settings(database_url, tmp_path, reaper_interval_seconds=0.1))
    service = next(gen)
    try:
        _exp(service)
        lease = service.client.post(
            "/api/v1/runs/claim", json={"worker": "w", "lease_seconds": 0.2}, headers=service.write
        ).json()
        deadline = time.monotonic() + 10
        while _get(service, lease["run"]["id"])["status"] != "lost" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _get(service, lease["run"]["id"])["status"] == "lost"
    finally:
        gen.close()
