"""Metrics ingestion: idempotent, out-of-order, per-point validation, limits, and the point refit (off the request
path, coalesced per run) after the batches."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

from tests.server.conftest import Service, make_settings, start_service
from tests.server.helpers import curve_points


def _run(service: Service, name: str = "r", budget: float = 8000.0) -> int:
    r = service.client.post("/api/v1/runs", json={"name": name, "budget": budget}, headers=service.write)
    assert r.status_code == 201
    return int(r.json()["id"])


def _post(service: Service, run_id: int, points: list[Any]) -> Any:
    return service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}, headers=service.write)


def test_batch_is_stored_refitted_and_starts_the_run(service: Service) -> None:
    run_id = _run(service)
    r = _post(service, run_id, curve_points(A=0.6))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accepted"] == 30 and body["duplicates"] == 0 and body["rejected"] == []
    assert body["status"] == "running" and body["action"] == "continue"
    # The point fit runs off the request path: the answer says it is pending (the run has no fit yet) ...
    assert body["fit"] is None and body["fit_pending"] is True
    service.drain()
    # ... and once it is stored, the next answer (a resend adding nothing) carries it, up to date.
    body = _post(service, run_id, curve_points(A=0.6)[-1:]).json()
    assert body["fit_pending"] is False and body["fit"]["compute_max"] == 8000.0
    assert body["fit"]["kind"] == "point" and body["fit"]["status"] == "ok"
    assert abs(body["fit"]["A"] - 0.6) < 0.05
    run = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()
    assert run["n_points"] == 30 and run["compute_used"] == 8000.0 and run["last_step"] == 300
    assert run["attempts"] == 1 and run["transitions"][-1]["reason"] == "first metrics received"
    assert run["fit"]["fit"]["predictions"][0]["compute"] == 8000.0
    stored = service.client.get(f"/api/v1/runs/{run_id}/metrics", headers=service.read).json()
    assert len(stored) == 30 and stored[0]["metrics"] == {"loss": 1.0}


def test_resending_is_idempotent_and_conflicts_are_rejected(service: Service) -> None:
    run_id = _run(service)
    pts = curve_points(A=0.6, n=10)
    first = _post(service, run_id, pts).json()
    assert first["accepted"] == 10 and first["fit_pending"]
    service.drain()
    first = _post(service, run_id, pts).json()
    assert first["fit"] is not None and not first["fit_pending"]
    again = _post(service, run_id, pts).json()
    # A resend gets the current fit, without a refit: still one point fit below.
    assert again["accepted"] == 0 and again["duplicates"] == 10 and again["fit"]["id"] == first["fit"]["id"]
    changed = [{**pts[0], "pass_rate": 0.99}]
    r = _post(service, run_id, changed)
    assert r.status_code == 422
    assert "already stored with other values" in r.json()["detail"]["rejected"][0]["errors"][0]
    stored = service.client.get(f"/api/v1/runs/{run_id}/metrics", headers=service.read).json()
    assert len(stored) == 10 and stored[0]["pass_rate"] == pts[0]["pass_rate"]
    fits = service.client.get(f"/api/v1/runs/{run_id}/fits", headers=service.read).json()
    assert len([f for f in fits if f["kind"] == "point"]) == 1


def test_out_of_order_points_are_accepted(service: Service) -> None:
    run_id = _run(service)
    pts = curve_points(A=0.55, n=12)
    assert _post(service, run_id, pts[6:]).json()["accepted"] == 6
    service.drain()  # each batch's point fit is stored before the next arrives (else they are coalesced)
    later = _post(service, run_id, pts[:6]).json()
    assert later["accepted"] == 6 and later["fit_pending"]
    service.drain()
    stored = service.client.get(f"/api/v1/runs/{run_id}/metrics", headers=service.read).json()
    assert [p["step"] for p in stored] == sorted(p["step"] for p in pts)
    fits = service.client.get(f"/api/v1/runs/{run_id}/fits?kind=point", headers=service.read).json()
    assert len(fits) == 2 and fits[0]["n_points"] > fits[1]["n_points"]  # newest first: how the forecast moved


def test_point_fits_are_coalesced_per_run_off_the_request_path(database_url: str, tmp_path: Path) -> None:
    """However many batches arrive within point_refit_seconds, the run is refitted about once, and the fit then
    stored has seen every batch; meanwhile each answer says truthfully that a newer fit is pending."""
    with contextlib.contextmanager(start_service)(
        make_settings(database_url, tmp_path, point_refit_seconds=3600.0)
    ) as service:
        run_id = _run(service)
        pts = curve_points(A=0.6, n=40)
        answers = [_post(service, run_id, pts[i : i + 5]).json() for i in range(0, 40, 5)]
        assert all(a["accepted"] == 5 and a["fit_pending"] for a in answers)
        service.drain()
        fits = service.client.get(f"/api/v1/runs/{run_id}/fits?kind=point", headers=service.read).json()
        assert 1 <= len(fits) <= 2, fits  # the first batch may be refitted at once; the other seven coalesce
        assert fits[0]["fit"]["compute_max"] == pts[-1]["compute"]  # it saw every batch
        done = _post(service, run_id, pts[-5:]).json()  # a resend: the current fit, nothing pending
        assert done["fit_pending"] is False and done["fit"]["id"] == fits[0]["id"]


def test_bad_points_are_rejected_and_good_ones_kept(service: Service) -> None:
    run_id = _run(service)
    good = curve_points(A=0.6, n=6)
    raw = (
        '{"points": ['
        + ", ".join(json.dumps(p) for p in good[:3])
        + ', {"step": 900, "compute": NaN, "pass_rate": 0.5}'
        + ', {"step": 901, "compute": -1.0, "pass_rate": 0.5}'
        + ', {"step": 902, "compute": 10.0, "pass_rate": 1.5}'
        + ', {"step": 903, "compute": Infinity}'
        + ', {"step": 904, "compute": 1.0, "metrics": {"loss": NaN}}'
        + ', {"step": "x", "compute": 1.0}, "not a point", {"step": 905, "compute": 1, "extra": 1}, '
        + ", ".join(json.dumps(p) for p in good[3:])
        + "]}"
    )
    r = service.client.post(
        f"/api/v1/runs/{run_id}/metrics", content=raw, headers={**service.write, "Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accepted"] == 6
    rejected = {x["index"]: x for x in body["rejected"]}
    assert sorted(rejected) == [3, 4, 5, 6, 7, 8, 9, 10]
    assert rejected[3]["step"] == 900 and "finite" in rejected[3]["errors"][0]
    assert "greater than or equal to 0" in rejected[4]["errors"][0]
    assert "less than or equal to 1" in rejected[5]["errors"][0]
    assert "metrics.loss" in rejected[7]["errors"][0]
    assert rejected[8]["step"] is None and "extra" in rejected[10]["errors"][0]
    stored = service.client.get(f"/api/v1/runs/{run_id}/metrics", headers=service.read).json()
    assert len(stored) == 6 and all(math.isfinite(p["compute"]) for p in stored)


def test_a_batch_with_no_valid_point_is_422(service: Service) -> None:
    run_id = _run(service)
    r = _post(service, run_id, [{"step": 1, "compute": -5.0, "pass_rate": 0.2}])
    assert r.status_code == 422
    assert r.json()["detail"]["rejected"][0]["index"] == 0
    run = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()
    assert run["status"] == "queued" and run["n_points"] == 0
    assert _post(service, run_id, []).status_code == 422
    assert (
        service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"pts": []}, headers=service.write).status_code
        == 422
    )
    assert _post(service, 4242, curve_points(A=0.5, n=2)).status_code == 404


def test_oversized_payloads(database_url: str, tmp_path: Path) -> None:
    gen = start_service(make_settings(database_url, tmp_path, max_points_per_batch=5, max_body_bytes=4096))
    service = next(gen)
    try:
        run_id = _run(service)
        r = _post(service, run_id, curve_points(A=0.6, n=6))
        assert r.status_code == 422 and "at most 5" in r.json()["detail"]
        big = [{"step": i, "compute": 1.0, "metrics": {f"metric_{j:03d}": 1.0 for j in range(60)}} for i in range(5)]
        r = _post(service, run_id, big)
        assert r.status_code == 413 and "exceeds" in r.json()["detail"]
        chunks = iter([b'{"points": [', b" " * 5000, b"]}"])
        r = service.client.post(
            f"/api/v1/runs/{run_id}/metrics",
            content=chunks,
            headers={**service.write, "Content-Type": "application/json"},
        )
        assert r.status_code == 413  # no Content-Length (chunked): counted while reading
        assert service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()["n_points"] == 0
    finally:
        gen.close()


def test_points_without_pass_rate_are_stored_not_fitted(service: Service) -> None:
    run_id = _run(service)
    body = _post(
        service, run_id, [{"step": s, "compute": float(s), "metrics": {"loss": 0.5}} for s in range(1, 6)]
    ).json()
    assert body["accepted"] == 5 and body["fit"] is None


def test_intervals_and_recommendations_come_off_the_request_path(database_url: str, tmp_path: Path) -> None:
    gen = start_service(make_settings(database_url, tmp_path, fit_workers=1))  # full fits in a worker process
    service = next(gen)
    try:
        _check_intervals(service)
    finally:
        gen.close()


def _check_intervals(service: Service) -> None:
    run_id = _run(service)
    _post(service, run_id, curve_points(A=0.6, n=40))
    service.drain()
    run = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()
    forecast = run["forecast"]
    assert forecast["kind"] == "full"
    lo, hi = forecast["fit"]["ci"]["A"]
    assert lo <= forecast["fit"]["A"] <= hi
    assert all(p["lo"] is not None for p in forecast["fit"]["predictions"])
    recs = service.client.get(f"/api/v1/experiments/{run['experiment_id']}/recommendations", headers=service.read)
    rec = recs.json()["recommendations"]
    assert [r["run_id"] for r in rec] == [run_id] and rec[0]["action"] in ("stop", "scale", "continue", "unstable")
    assert rec[0]["reason"]
