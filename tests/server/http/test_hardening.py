"""No request can exhaust the server, no stale worker can write, every failure is a clear 4xx/503.

Each test reproduces a defect found by probing the live service (both databases).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from server.assess.background import reap_once
from server.lifecycle.runs import reap_expired
from server.store.models import utcnow
from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc

YAML = {"Content-Type": "application/yaml"}
JSON = {"Content-Type": "application/json"}


def _billion_laughs(levels: int = 9) -> str:
    """A few hundred bytes that expand to 9**levels strings (nested anchors in one grid axis)."""
    items = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    items += [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "name: x\ntask: t\nmodel: m\nbudget: 1\ngrid:\n  batch.prompts: [" + ", ".join(items) + "]\n"


def test_yaml_aliases_are_refused_and_errors_do_not_echo_input(service: Service) -> None:
    c, h = service.client, service.write
    body = _billion_laughs()
    assert len(body) < 1000
    r = c.post("/api/v1/experiments?dry_run=true", content=body, headers={**h, **YAML})
    assert r.status_code == 422, r.status_code
    assert len(r.content) < 2000 and "alias" in r.text
    # A single huge value in the wrong place is named, not echoed.
    doc = sweep_doc(grid={"batch.prompts": ["x" * 100_000]})
    r = c.post("/api/v1/experiments?dry_run=true", json=doc, headers=h)
    assert r.status_code == 422 and len(r.content) < 5000, len(r.content)
    r = c.post("/api/v1/experiments?dry_run=true", json={**sweep_doc(), "name": "y" * 100_000}, headers=h)
    assert r.status_code == 422 and len(r.content) < 5000, len(r.content)
    r = c.post("/api/v1/runs", json={"name": "z" * 100_000}, headers=h)
    assert r.status_code == 422 and len(r.content) < 5000, len(r.content)


def test_deeply_nested_bodies_are_a_422(service: Service) -> None:
    c, h = service.client, service.write
    exp = c.post("/api/v1/experiments", json=sweep_doc(), headers=h).json()
    run_id = exp["runs"][0]["id"]
    deep_json = '{"points": [{"step": 1, "compute": 1, "metrics": ' + "[" * 100_000 + "]" * 100_000 + "}]}"
    r = c.post(f"/api/v1/runs/{run_id}/metrics", content=deep_json, headers={**h, **JSON})
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"
    deep_doc = '{"name": "d", "recipe": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = c.post("/api/v1/experiments?dry_run=true", content=deep_doc, headers={**h, **JSON})
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"
    r = c.post("/api/v1/experiments?dry_run=true", content="recipe: " + "[" * 50_000, headers={**h, **YAML})
    assert r.status_code == 422 and "deep" in r.text
    moderately = {"name": "d2", **{k: v for k, v in sweep_doc().items() if k != "name"}}
    nested: Any = 1
    for _ in range(40):
        nested = {"k": nested}
    r = c.post("/api/v1/experiments?dry_run=true", json={**moderately, "recipe": nested}, headers=h)
    assert r.status_code == 422 and "deep" in r.text


def _claimed_then_lost(service: Service) -> tuple[int, str]:
    c, h = service.client, service.write
    c.post("/api/v1/experiments", json=sweep_doc(), headers=h)
    lease = c.post("/api/v1/runs/claim", json={"worker": "old", "lease_seconds": 1}, headers=h).json()
    run_id = lease["run"]["id"]
    with service.ctx.sessions.begin() as session:
        assert run_id in reap_expired(session, utcnow() + timedelta(seconds=60))
    assert c.get(f"/api/v1/runs/{run_id}", headers=h).json()["status"] == "lost"
    return run_id, lease["lease_id"]


def test_a_stale_lease_cannot_write_to_a_lost_or_requeued_run(service: Service) -> None:
    c, h = service.client, service.write
    run_id, stale = _claimed_then_lost(service)
    pts = {"points": curve_points(A=0.6, n=3)}
    # Lost: the old lease may not add points or change the status.
    r = c.post(f"/api/v1/runs/{run_id}/metrics?lease_id={stale}", json=pts, headers=h)
    assert r.status_code == 409, r.text
    r = c.post(f"/api/v1/runs/{run_id}/status", json={"status": "failed", "reason": "x", "lease_id": stale}, headers=h)
    assert r.status_code == 409
    # Re-queued by retry: still nothing, and the run stays claimable.
    assert c.post(f"/api/v1/runs/{run_id}/retry", headers=h).json()["status"] == "queued"
    r = c.post(f"/api/v1/runs/{run_id}/metrics?lease_id={stale}", json=pts, headers=h)
    assert r.status_code == 409, r.text
    r = c.post(f"/api/v1/runs/{run_id}/status", json={"status": "failed", "reason": "x", "lease_id": stale}, headers=h)
    assert r.status_code == 409
    r = c.post(f"/api/v1/runs/{run_id}/status", json={"status": "running", "reason": "x", "lease_id": stale}, headers=h)
    assert r.status_code == 409
    run = c.get(f"/api/v1/runs/{run_id}", headers=h).json()
    assert run["status"] == "queued" and run["n_points"] == 0
    # A run that workers execute starts only through a claim, even without a lease id.
    r = c.post(f"/api/v1/runs/{run_id}/metrics", json=pts, headers=h)
    assert r.status_code == 409 and "claim" in r.json()["detail"]
    again = c.post("/api/v1/runs/claim", json={"worker": "new", "lease_seconds": 1}, headers=h).json()
    assert again["run"]["id"] == run_id and again["run"]["attempts"] == 2
    assert again["run"]["lease_expires_at"] is not None
    # The new lease expires and is reaped: the run is never stuck in `running` without a lease.
    with service.ctx.sessions.begin() as session:
        assert run_id in reap_expired(session, utcnow() + timedelta(seconds=60))
    assert reap_once(service.ctx.sessions, service.ctx.notifier) == []


def test_registered_runs_still_start_with_their_first_metrics(service: Service) -> None:
    c, h = service.client, service.write
    run = c.post("/api/v1/runs", json={"name": "ext"}, headers=h).json()
    r = c.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": curve_points(A=0.6, n=3)}, headers=h)
    assert r.status_code == 200 and r.json()["status"] == "running"
    r = c.post(f"/api/v1/runs/{run['id']}/metrics?lease_id=bogus", json={"points": curve_points(A=0.6, n=4)}, headers=h)
    assert r.status_code == 409


def test_wrong_types_are_rejected_not_coerced(service: Service) -> None:
    c, h = service.client, service.write
    run = c.post("/api/v1/runs", json={"name": "typed"}, headers=h).json()
    url = f"/api/v1/runs/{run['id']}/metrics"
    for bad in (
        {"step": 1, "compute": 1.0, "pass_rate": True},
        {"step": "1", "compute": 1.0},
        {"step": 1, "compute": "1.5"},
        {"step": 1, "compute": 1.0, "pass_rate": "0.5"},
        {"step": True, "compute": 1.0},
        {"step": 1, "compute": 1.0, "metrics": {"loss": "0.3"}},
    ):
        r = c.post(url, json={"points": [bad]}, headers=h)
        assert r.status_code == 422, (bad, r.text)
    # Proper JSON numbers (ints for floats included) are fine.
    ok = c.post(url, json={"points": [{"step": 1, "compute": 2, "pass_rate": 0, "metrics": {"n": 3}}]}, headers=h)
    assert ok.status_code == 200 and ok.json()["accepted"] == 1
    assert c.post("/api/v1/runs", json={"name": "b", "budget": "100"}, headers=h).status_code == 422
    assert c.post("/api/v1/runs", json={"name": "s", "seed": True}, headers=h).status_code == 422
    assert c.post("/api/v1/runs", json={"name": "s2", "seed": 1, "budget": 5}, headers=h).status_code == 201
    r = c.post(f"/api/v1/runs/{run['id']}/budget", json={"budget": "1e6"}, headers=h)
    assert r.status_code == 422
    for doc in (
        sweep_doc(budget="8000"),
        sweep_doc(seeds=[True]),
        sweep_doc(fit={"burn_in": True}),
        sweep_doc(policy={"threshold": {"value": True}}),
    ):
        assert c.post("/api/v1/experiments?dry_run=true", json=doc, headers=h).status_code == 422, doc
    # YAML numbers such as 1e4 (YAML 1.1 reads them as strings) are still numbers.
    r = c.post(
        "/api/v1/experiments?dry_run=true",
        content="name: y\ntask: t\nmodel: m\nbudget: 1e4\nseeds: [0, 1]\n",
        headers={**h, **YAML},
    )
    assert r.status_code == 200 and r.json()["total_budget"] == 2e4, r.text


def test_nul_in_metric_names_and_long_cell_names_are_a_422_on_both_databases(service: Service) -> None:
    c, h = service.client, service.write
    run = c.post("/api/v1/runs", json={"name": "nul"}, headers=h).json()
    pts = [
        {"step": 1, "compute": 1.0, "metrics": {"lo\u0000ss": 1.0}},
        {"step": 2, "compute": 2.0, "metrics": {"loss": 1.0}},
    ]
    r = c.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": pts}, headers=h)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accepted"] == 1 and [x["index"] for x in body["rejected"]] == [0]
    long_cell = sweep_doc(name="long", grid={"length.interruption.phrase": ["x" * 400, "y"]})
    r = c.post("/api/v1/experiments", json=long_cell, headers=h)
    assert r.status_code == 422 and "characters" in r.text, r.text
    assert len(r.content) < 1000


def test_the_point_fit_runs_outside_the_write_transaction_and_is_bounded(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite has one writer: a fit inside the metrics transaction stalled every other client's ingestion."""
    import server.assess.forecasting as forecasting

    c, h = service.client, service.write
    run = c.post("/api/v1/runs", json={"name": "long"}, headers=h).json()
    seen: list[tuple[int, bool]] = []
    real = forecasting.fit_curve

    def spying(compute: Any, pass_rate: Any, *args: Any, **kw: Any) -> Any:
        if not kw.get("intervals"):
            seen.append((len(compute), _another_writer_can_write(service)))
        return real(compute, pass_rate, *args, **kw)

    monkeypatch.setattr(forecasting, "fit_curve", spying)
    n = 12_000
    for start in range(0, n, 6000):
        pts = [
            {"step": i, "compute": float(i + 1), "pass_rate": min(0.9, 0.1 + i / n)} for i in range(start, start + 6000)
        ]
        r = c.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": pts}, headers=h)
        assert r.status_code == 200 and r.json()["fit_pending"]
        service.drain()  # the point fit runs off the request path
    r = c.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": pts[-1:]}, headers=h)  # a resend: the fit
    assert r.status_code == 200 and r.json()["fit"] is not None and not r.json()["fit_pending"]
    assert seen and all(free for _, free in seen), seen
    assert max(k for k, _ in seen) <= 2000  # a long curve is thinned for the point fit
    detail = c.get(f"/api/v1/runs/{run['id']}", headers=h).json()
    assert detail["n_points"] == n and detail["latest_fit_id"] == r.json()["fit"]["id"]


def _another_writer_can_write(service: Service) -> bool:
    """True when a second connection can take the write lock (SQLite) / lock the run row (PostgreSQL) at once."""
    from sqlalchemy import text

    engine = service.ctx.engine
    if engine.dialect.name == "sqlite":
        import sqlite3

        path = service.ctx.settings.database_url.split("///", 1)[1]
        raw = sqlite3.connect(path, timeout=0.1, isolation_level=None)
        try:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            raw.close()
    with engine.connect() as conn:
        conn.execute(text("SET LOCAL lock_timeout = '100ms'"))
        try:
            conn.execute(text("SELECT id FROM runs FOR UPDATE"))
            return True
        except Exception:
            return False


def test_events_check_the_token_first_and_a_revoked_token_closes_its_stream(
    tmp_path: Path, sqlite_template: Path
) -> None:
    import shutil
    import threading
    import time

    import httpx

    from tests.server.conftest import make_settings, start_service
    from tests.server.live import live_server

    db = tmp_path / "live.db"
    shutil.copy(sqlite_template, db)
    gen = start_service(make_settings(f"sqlite:///{db}", tmp_path, sse_poll_seconds=0.2))
    service = next(gen)
    try:
        c = service.client
        # Unknown ids cannot be probed without a valid token.
        assert c.get("/api/v1/experiments/999/events").status_code == 401
        bad = {"Authorization": "Bearer srl_nope"}
        assert c.get("/api/v1/experiments/999/events", headers=bad).status_code == 401
        exp = c.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
        run_id = exp["runs"][0]["id"]
        tok = c.post("/api/v1/tokens", json={"name": "viewer", "scopes": ["read"]}, headers=service.admin).json()
        with live_server(service.ctx) as base:
            received: list[str] = []
            closed = threading.Event()

            def listen() -> None:
                headers = {"Authorization": f"Bearer {tok['token']}"}
                with httpx.stream(
                    "GET", f"{base}/api/v1/experiments/{exp['id']}/events", headers=headers, timeout=20
                ) as r:
                    for line in r.iter_lines():
                        if line.startswith("event:"):
                            received.append(line)
                closed.set()

            t = threading.Thread(target=listen, daemon=True)
            t.start()
            deadline = time.monotonic() + 10
            while not received and time.monotonic() < deadline:
                time.sleep(0.05)
            assert received  # the stored run_created events
            assert c.delete(f"/api/v1/tokens/{tok['id']}", headers=service.admin).status_code == 200
            time.sleep(0.5)
            before = len(received)
            for i in range(3):
                pts = {"points": [{"step": i, "compute": float(i + 1)}]}
                httpx.post(f"{base}/api/v1/runs/{run_id}/metrics", json=pts, headers=service.write)
            assert closed.wait(5), "the stream of a revoked token stayed open"
            assert len(received) == before
    finally:
        gen.close()


def test_healthz_does_not_wait_for_the_sqlite_write_lock(tmp_path: Path, sqlite_template: Path) -> None:
    import shutil
    import sqlite3
    import time

    from tests.server.conftest import make_settings, start_service

    db = tmp_path / "h.db"
    shutil.copy(sqlite_template, db)
    gen = start_service(make_settings(f"sqlite:///{db}", tmp_path))
    service = next(gen)
    raw = sqlite3.connect(db, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        t0 = time.monotonic()
        r = service.client.get("/healthz")
        assert r.status_code == 200 and time.monotonic() - t0 < 2
    finally:
        raw.execute("ROLLBACK")
        raw.close()
        gen.close()


def test_database_unavailable_is_a_json_503_with_retry_after(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy.exc import OperationalError

    import server.lifecycle.token_cache

    def down(*_: Any) -> Any:
        raise OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(server.lifecycle.token_cache, "lookup_active", down)
    service.ctx.tokens.forget()
    # A read, and a write (authenticated by admission before its body is read), both answer JSON 503s.
    for r in (
        service.client.get("/api/v1/runs", headers=service.read),
        service.client.post("/api/v1/runs", json={"name": "x"}, headers=service.write),
    ):
        assert r.status_code == 503 and r.headers["content-type"] == "application/json"
        assert int(r.headers["retry-after"]) >= 1 and "database" in r.json()["detail"]


def test_task_and_model_paths_must_lie_under_the_allowed_roots(database_url: str, tmp_path: Path) -> None:
    from tests.server.conftest import make_settings, start_service

    data = tmp_path / "data"
    (data / "model").mkdir(parents=True)
    gen = start_service(make_settings(database_url, tmp_path, allowed_data_roots=[str(data)]))
    service = next(gen)
    try:
        c, h = service.client, service.write
        answers = []
        for model, task in (
            ("/etc", "gsm8k"),
            ("/no/such/dir", "gsm8k"),
            (f"{data}/../../../../etc", "gsm8k"),
            ("tiny", "{kind: math, path: /etc/passwd}"),
            ("tiny", "{kind: math, path: /etc/no-such-file}"),
        ):
            r = c.post("/api/v1/experiments?dry_run=true", json=sweep_doc(model=model, task=task), headers=h)
            assert r.status_code == 422 and "allowed roots" in r.text, r.text
            answers.append(r.json()["detail"][0].split("'")[-1])
            r = c.post("/api/v1/runs", json={"name": "p", "model": model, "task": task}, headers=h)
            assert r.status_code == 422 and "allowed roots" in r.text
        assert len(set(answers)) == 1  # the same words whether the path exists or not
        r = c.post("/api/v1/experiments?dry_run=true", json=sweep_doc(model=str(data / "model")), headers=h)
        assert r.status_code == 200
        r = c.post("/api/v1/experiments?dry_run=true", json=sweep_doc(model="Qwen/Qwen2.5-0.5B"), headers=h)
        assert r.status_code == 200  # a hub id is not a path
    finally:
        gen.close()


def test_default_is_reserved_and_concurrent_first_registrations_all_succeed(service: Service) -> None:
    from concurrent.futures import ThreadPoolExecutor

    c, h = service.client, service.write
    r = c.post("/api/v1/experiments", json=sweep_doc(name="default"), headers=h)
    assert r.status_code == 409 and "reserved" in r.text
    with ThreadPoolExecutor(8) as pool:
        codes = list(
            pool.map(lambda i: c.post("/api/v1/runs", json={"name": f"r{i}"}, headers=h).status_code, range(8))
        )
    assert codes == [201] * 8, codes
    exps = [e for e in c.get("/api/v1/experiments", headers=h).json() if e["name"] == "default"]
    assert len(exps) == 1 and exps[0]["n_runs"] == 8


def test_a_duplicate_name_is_refused_before_expansion(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    import server.lifecycle.experiments

    c, h = service.client, service.write
    assert c.post("/api/v1/experiments", json=sweep_doc(name="dup"), headers=h).status_code == 201

    def no_expansion(*_: Any) -> Any:
        raise AssertionError("expanded a grid whose name is taken")

    monkeypatch.setattr(server.lifecycle.experiments, "expand", no_expansion)
    assert c.post("/api/v1/experiments", json=sweep_doc(name="dup"), headers=h).status_code == 409


def test_a_host_header_naming_no_allowed_host_is_a_json_400(tmp_path: Path) -> None:
    """DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    from fastapi.testclient import TestClient

    from scalerl.app import create_app
    from server.store.migrate import upgrade
    from server.store.settings import Settings

    url = f"sqlite:///{tmp_path / 'hosts.db'}"
    upgrade(url)
    app = create_app(Settings(database_url=url, home=tmp_path, reaper_interval_seconds=3600.0, fit_workers=0))
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        for host in ("127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]:8765", "::1"):
            assert c.get("/healthz", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", "", "testserver"):
            r = c.get("/api/v1/experiments", headers={"Host": host})
            assert r.status_code == 400, host
            assert r.headers["content-type"] == "application/json" and "allowed host" in r.json()["detail"]
        assert c.get("/", headers={"Host": "evil.example"}).status_code == 400  # the pages too
    configured = Settings(database_url=url, home=tmp_path, host="10.0.0.5", allowed_hosts=())
    assert configured.trusted_hosts == ("localhost", "127.0.0.1", "::1", "10.0.0.5")
    app = create_app(
        Settings(database_url=url, home=tmp_path, reaper_interval_seconds=3600.0, allowed_hosts=["*.example.org"])
    )
    with TestClient(app) as c:
        assert c.get("/healthz", headers={"Host": "scalerl.example.org"}).status_code == 200
        assert c.get("/healthz", headers={"Host": "example.org.evil"}).status_code == 400
        assert c.get("/healthz", headers={"Host": "localhost"}).status_code == 400  # a list replaces the defaults
    app = create_app(Settings(database_url=url, home=tmp_path, reaper_interval_seconds=3600.0, allowed_hosts=["*"]))
    with TestClient(app) as c:
        assert c.get("/healthz", headers={"Host": "anything.example"}).status_code == 200


def test_api_docs_pages_use_local_assets_under_a_csp(service: Service) -> None:
    for path in ("/docs", "/redoc"):
        r = service.client.get(path)
        assert r.status_code == 200 and "script-src 'self';" in r.headers["content-security-policy"]
        assert "cdn" not in r.text and "http" not in r.text.replace("http-equiv", "")
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "swagger-init.js", "redoc.standalone.js"):
        assert service.client.get(f"/docs-assets/{name}").status_code == 200, name
    assert service.client.get("/docs-assets/../settings.py").status_code == 404


def test_the_creation_answer_pages_the_runs(service: Service) -> None:
    """A 4,096-run grid answered 7.4 MB (every run with its recipe); now the first page and a link."""
    c, h = service.client, service.write
    doc = sweep_doc("paged", grid={"batch.prompts": list(range(8, 258))}, max_runs=250)
    r = c.post("/api/v1/experiments", json=doc, headers=h)
    assert r.status_code == 201, r.text
    exp = r.json()
    assert exp["n_runs"] == 250 and len(exp["runs"]) == 100
    assert exp["runs_next"] == f"/api/v1/runs?experiment_id={exp['id']}&offset=100&limit=1000"
    rest = c.get(exp["runs_next"], headers=h).json()
    assert [x["id"] for x in exp["runs"] + rest] == [
        x["id"] for x in c.get(f"/api/v1/experiments/{exp['id']}", headers=h).json()["runs"]
    ]
    small = c.post("/api/v1/experiments", json=sweep_doc("small"), headers=h).json()
    assert len(small["runs"]) == 2 and small["runs_next"] is None
    none = c.post("/api/v1/experiments?runs_limit=0", json=sweep_doc("none"), headers=h).json()
    assert none["runs"] == [] and none["n_runs"] == 2 and none["runs_next"].endswith("offset=0&limit=1000")
    every = c.post("/api/v1/experiments?runs_limit=4096", json={**doc, "name": "every"}, headers=h).json()
    assert len(every["runs"]) == 250 and every["runs_next"] is None
    assert c.post("/api/v1/experiments?runs_limit=5000", json=sweep_doc("x"), headers=h).status_code == 422


@pytest.mark.parametrize("bad", [{"min_gain": "0.1"}, {"min_gain": True}, {"hold": "2"}, {"hold": 2.5}])
def test_policy_numbers_are_strict(service: Service, bad: dict[str, Any]) -> None:
    r = service.client.post(
        "/api/v1/experiments?dry_run=true", json=sweep_doc(policy={"mode": "recommend", **bad}), headers=service.write
    )
    assert r.status_code == 422, (bad, r.text)
    ok = sweep_doc(policy={"mode": "recommend", "min_gain": 0, "hold": 2})  # an int for a float is fine
    assert service.client.post("/api/v1/experiments?dry_run=true", json=ok, headers=service.write).status_code == 200


def test_reading_an_experiment_pages_its_runs(service: Service) -> None:
    """GET /api/v1/experiments/{id} returned every run (the ``default`` experiment grows without bound): a page of
    ``runs_limit`` (default 1000, at most 10,000) from ``runs_offset``, with the URL of the next page; a bad value is
    a 422 that says what is allowed."""
    c, h = service.client, service.write
    doc = sweep_doc("read-paged", grid={"batch.prompts": list(range(8, 33))}, max_runs=25)
    exp = c.post("/api/v1/experiments?runs_limit=0", json=doc, headers=h).json()
    whole = c.get(f"/api/v1/experiments/{exp['id']}", headers=h).json()
    assert len(whole["runs"]) == 25 and whole["n_runs"] == 25 and whole["runs_next"] is None  # default 1000
    seen, url, pages = [], f"/api/v1/experiments/{exp['id']}?runs_limit=10", 0
    while url:
        page = c.get(url, headers=h).json()
        assert page["n_runs"] == 25 and len(page["runs"]) <= 10 and page["name"] == "read-paged"
        seen += [r["id"] for r in page["runs"]]
        url, pages = page["runs_next"], pages + 1
    assert pages == 3 and seen == [r["id"] for r in whole["runs"]]
    assert page["runs_next"] is None and len(page["runs"]) == 5
    past = c.get(f"/api/v1/experiments/{exp['id']}?runs_offset=100", headers=h).json()
    assert past["runs"] == [] and past["runs_next"] is None
    only = c.get(f"/api/v1/experiments/{exp['id']}?runs_limit=0", headers=h).json()
    assert only["runs"] == [] and only["document"]["name"] == "read-paged"
    for bad in ("runs_limit=10001", "runs_limit=-1", "runs_offset=-5", "runs_limit=ten"):
        r = c.get(f"/api/v1/experiments/{exp['id']}?{bad}", headers=h)
        assert r.status_code == 422, (bad, r.text)
        assert bad.split("=")[0] in r.text
    assert "10000" in c.get(f"/api/v1/experiments/{exp['id']}?runs_limit=10001", headers=h).text
