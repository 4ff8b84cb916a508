"""Server-sent events per experiment: replay, resume with Last-Event-ID, and live delivery over real HTTP."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.server.conftest import Service, make_settings, start_service
from tests.server.helpers import curve_points, sweep_doc
from tests.server.live import live_server


def parse_sse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        if "data" in fields:
            events.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
    return events


def _setup(service: Service) -> tuple[int, int]:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    run_id = exp["runs"][0]["id"]
    service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": curve_points(A=0.6)}, headers=service.write)
    service.client.post(f"/api/v1/runs/{run_id}/stop", headers=service.write)
    service.drain()  # the interval refit and recommendations add their events too
    return exp["id"], run_id


def test_replay_and_resume(service: Service) -> None:
    exp_id, run_id = _setup(service)
    url = f"/api/v1/experiments/{exp_id}/events?follow=false"
    r = service.client.get(url, headers=service.read)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["run_created", "run_created"]
    assert "points" in kinds and kinds.count("fit") == 2 and "recommendations" in kinds and kinds.count("status") == 2
    ids = [e["id"] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    points = next(e for e in events if e["event"] == "points")["data"]
    assert points["run_id"] == run_id and points["data"]["accepted"] == 30 and points["data"]["evaluated"] == 30
    assert "points" not in points["data"]  # a notification: nobody reads the points from the event
    status = [e["data"]["data"] for e in events if e["event"] == "status"]
    assert status[-1]["to"] == "stopping"
    cut = ids[2]
    resumed = parse_sse(service.client.get(url, headers={**service.read, "Last-Event-ID": str(cut)}).text)
    assert [e["id"] for e in resumed] == ids[3:]
    assert parse_sse(service.client.get(f"{url}&after={ids[-1]}", headers=service.read).text) == []
    assert service.client.get(url, headers={**service.read, "Last-Event-ID": "abc"}).status_code == 422
    assert service.client.get("/api/v1/experiments/999/events", headers=service.read).status_code == 404
    assert service.client.get(url).status_code == 401


def test_live_stream_over_http(tmp_path: Path, sqlite_template: Path) -> None:
    import shutil

    db = tmp_path / "live.db"
    shutil.copy(sqlite_template, db)
    gen = start_service(make_settings(f"sqlite:///{db}", tmp_path, sse_poll_seconds=0.2))
    service = next(gen)
    try:
        exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
        run_id = exp["runs"][0]["id"]
        with live_server(service.ctx) as base:
            received: list[dict[str, Any]] = []
            done = threading.Event()

            def listen(last: int | None) -> None:
                headers = {**service.read, **({"Last-Event-ID": str(last)} if last is not None else {})}
                with httpx.stream(
                    "GET", f"{base}/api/v1/experiments/{exp['id']}/events", headers=headers, timeout=20
                ) as r:
                    buf = ""
                    for chunk in r.iter_text():
                        buf += chunk
                        while "\n\n" in buf:
                            block, buf = buf.split("\n\n", 1)
                            received.extend(parse_sse(block + "\n\n"))
                            if any(e["event"] == "fit" for e in received):
                                done.set()
                                return

            created = parse_sse(
                httpx.get(
                    f"{base}/api/v1/experiments/{exp['id']}/events?follow=false", headers=service.read, timeout=10
                ).text
            )
            last = created[-1]["id"]
            t = threading.Thread(target=listen, args=(last,), daemon=True)
            t.start()
            pts = {"points": curve_points(A=0.6, n=10)}
            assert (
                httpx.post(f"{base}/api/v1/runs/{run_id}/metrics", json=pts, headers=service.write).status_code == 200
            )
            assert done.wait(15), f"no fit event arrived; got {[e['event'] for e in received]}"
            t.join(5)
            assert all(e["id"] > last for e in received)
            assert [e["event"] for e in received][:2] == ["status", "points"]
    finally:
        gen.close()


def test_recommendations_events_leave_out_runs_that_have_finished(service: Service) -> None:
    """Like the REST recommendations: the stream's advice is for the runs still running or queued."""
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    done, live = exp["runs"][0]["id"], exp["runs"][1]["id"]
    for run_id, a in ((done, 0.62), (live, 0.5)):
        r = service.client.post(
            f"/api/v1/runs/{run_id}/metrics", json={"points": curve_points(A=a, seed=run_id)}, headers=service.write
        )
        assert r.status_code == 200, r.text
    service.drain()
    url = f"/api/v1/experiments/{exp['id']}/events?follow=false"

    def advised() -> list[set[int]]:
        events = parse_sse(service.client.get(url, headers=service.read).text)
        recs = [e["data"]["data"]["recommendations"] for e in events if e["event"] == "recommendations"]
        return [{int(r["run_id"]) for r in body} for body in recs]

    before = advised()
    assert before and done in before[-1] and live in before[-1], "both advised while both run"
    finished = service.client.post(
        f"/api/v1/runs/{done}/status", json={"status": "succeeded", "reason": "budget reached"}, headers=service.write
    )
    assert finished.status_code == 200, finished.text
    after = advised()
    assert after and all(done not in ids for ids in after), "a finished run's old advice is not replayed"
    assert live in after[-1]
    rest = service.client.get(f"/api/v1/experiments/{exp['id']}/recommendations", headers=service.read).json()
    assert {r["run_id"] for r in rest["recommendations"]} == after[-1], "the same filter as the REST endpoint"
