"""Alerts end to end inside the service (SQLite): what raises them, de-duplication and rate limits, webhook
deliveries with signatures and retries, the Slack payload, email, thresholds, and the alerts API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from server.alerts.delivery import deliver_due, slack_payload, verify
from server.alerts.raising import raise_alert
from server.alerts.settings import AlertSettings, alert_settings
from server.lifecycle.runs import SYSTEM, transition
from server.store.alert_models import Alert, AlertDelivery
from server.store.models import FitSnapshot, RecommendationSnapshot, Run, utcnow
from tests.server.conftest import Service, make_settings, start_service
from tests.worker.receiver import webhook_receiver
from tests.worker.smtp_sink import smtp_sink

GRID = {"name": "alerts", "task": "synthetic-addition", "model": "tiny", "budget": 1.0, "seeds": [0, 1]}


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    from server.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'alerts.db'}"
    upgrade(url)
    monkeypatch.setenv("SCALERL_WEBHOOK_ALLOW_PRIVATE", "true")  # the test receivers listen on 127.0.0.1
    alert_settings.cache_clear()
    yield from start_service(make_settings(url, tmp_path, interval_refit=False))
    alert_settings.cache_clear()


def experiment(svc: Service) -> list[int]:
    resp = svc.client.post("/api/v1/experiments", json=GRID, headers=svc.write)
    assert resp.status_code == 201, resp.text
    runs = svc.client.get("/api/v1/runs", params={"experiment_id": resp.json()["id"]}, headers=svc.read).json()
    return [r["id"] for r in runs]


def alerts(svc: Service, **params: Any) -> list[dict[str, Any]]:
    resp = svc.client.get("/api/v1/alerts", params=params, headers=svc.read)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def hook(svc: Service, url: str, **body: Any) -> dict[str, Any]:
    resp = svc.client.post("/api/v1/alerts/webhooks", json={"name": "h", "url": url, **body}, headers=svc.admin)
    assert resp.status_code == 201, resp.text
    return resp.json()  # type: ignore[no-any-return]


def set_status(svc: Service, run_id: int, to: str, reason: str, actor: str = "test") -> None:
    with svc.ctx.sessions.begin() as session:
        run = session.get(Run, run_id)
        assert run is not None
        transition(session, run, to, reason, actor)


def test_webhook_crud_and_validation(service: Service) -> None:
    c, admin = service.client, service.admin
    created = hook(service, "http://127.0.0.1:9/x", events=["run_failed"], format="slack")
    assert len(created["secret"]) >= 32 and created["events"] == ["run_failed"]
    listed = c.get("/api/v1/alerts/webhooks", headers=admin).json()
    assert [h["id"] for h in listed] == [created["id"]] and "secret" not in listed[0]
    patched = c.patch(f"/api/v1/alerts/webhooks/{created['id']}", json={"enabled": False}, headers=admin).json()
    assert patched["enabled"] is False and patched["format"] == "slack"
    for bad in ({"url": "ftp://x/y"}, {"events": ["nope"]}, {"format": "xml"}, {"secret": "short"}):
        resp = c.post("/api/v1/alerts/webhooks", json={"name": "b", "url": "http://h/x", **bad}, headers=admin)
        assert resp.status_code == 422, (bad, resp.text)
    assert (
        c.post("/api/v1/alerts/webhooks", json={"name": "b", "url": "http://h/x"}, headers=service.write).status_code
        == 403
    )
    assert (
        c.post(
            "/api/v1/alerts/webhooks", json={"name": "b", "url": "http://h/x", "experiment_id": 99}, headers=admin
        ).status_code
        == 404
    )
    assert c.delete(f"/api/v1/alerts/webhooks/{created['id']}", headers=admin).status_code == 204
    assert c.delete(f"/api/v1/alerts/webhooks/{created['id']}", headers=admin).status_code == 404


def test_test_endpoint_sends_a_signed_alert_and_reports_the_answer(service: Service) -> None:
    with webhook_receiver(fail_first=1) as receiver:
        h = hook(service, receiver.url, secret="s" * 20)
        first = service.client.post(f"/api/v1/alerts/webhooks/{h['id']}/test", headers=service.admin).json()
        second = service.client.post(f"/api/v1/alerts/webhooks/{h['id']}/test", headers=service.admin).json()
    assert first == {"ok": False, "status_code": 500, "error": "HTTP 500"}  # the receiver's body is not echoed
    assert second == {"ok": True, "status_code": 200, "error": ""}
    got = receiver.requests[1]
    assert got.headers["X-Scalerl-Event"] == "test"
    assert verify("s" * 20, got.headers["X-Scalerl-Timestamp"], got.body, got.headers["X-Scalerl-Signature"])
    assert not verify(
        "wrong-secret-xxxxxx", got.headers["X-Scalerl-Timestamp"], got.body, got.headers["X-Scalerl-Signature"]
    )
    unreachable = hook(service, "http://127.0.0.1:9/nothing-listens")
    out = service.client.post(f"/api/v1/alerts/webhooks/{unreachable['id']}/test", headers=service.admin).json()
    assert out["ok"] is False and out["status_code"] is None and out["error"]


def test_webhooks_to_loopback_and_private_addresses_are_refused_without_the_setting(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test button (and real deliveries) reached the server's own loopback port and echoed the
    start of the answer; now non-public addresses are refused unless SCALERL_WEBHOOK_ALLOW_PRIVATE is set."""
    monkeypatch.delenv("SCALERL_WEBHOOK_ALLOW_PRIVATE")
    alert_settings.cache_clear()
    run_id, _ = experiment(service)
    with webhook_receiver() as receiver:
        h = hook(service, receiver.url, events=["run_failed"])
        out = service.client.post(f"/api/v1/alerts/webhooks/{h['id']}/test", headers=service.admin).json()
        assert out["ok"] is False and out["status_code"] is None
        assert out["error"].startswith("refused: 127.0.0.1 resolves to 127.0.0.1") and "ok" not in out["error"][-3:]
        for url in ("http://169.254.169.254/latest/meta-data", "http://[::ffff:10.0.0.1]:8080/x", "http://localhost/"):
            other = hook(service, url)
            got = service.client.post(f"/api/v1/alerts/webhooks/{other['id']}/test", headers=service.admin).json()
            assert got["error"].startswith("refused:"), (url, got)
            service.client.delete(f"/api/v1/alerts/webhooks/{other['id']}", headers=service.admin)
        set_status(service, run_id, "running", "claimed")
        set_status(service, run_id, "failed", "boom")
        assert deliver_due(service.ctx.sessions, AlertSettings()) == 0  # a real delivery is refused too
        [d] = alerts(service, run_id=run_id)[0]["deliveries"]
        assert d["status"] == "pending" and d["last_error"].startswith("refused:")
        assert receiver.requests == []
        # An allow-list naming the receiver's address lets it through (a self-hosted receiver).
        allowed = AlertSettings(webhook_allowed_networks=("127.0.0.0/8",), alert_retry_seconds=0.001)
        import time

        time.sleep(0.01)
        with service.ctx.sessions.begin() as session:
            session.get(AlertDelivery, d["id"]).next_attempt_at = utcnow()  # type: ignore[union-attr]
        assert deliver_due(service.ctx.sessions, allowed) == 1
        assert len(receiver.requests) == 1


def test_failed_run_alert_is_delivered_with_retries(service: Service) -> None:
    run_id, _ = experiment(service)
    with webhook_receiver(fail_first=1) as receiver:
        h = hook(service, receiver.url, events=["run_failed"])
        hook(service, receiver.url + "/slack", format="slack", events=["run_lost"])  # does not match: no delivery
        set_status(service, run_id, "running", "claimed")
        set_status(service, run_id, "failed", "training diverged: loss is nan at step 3")
        [alert] = alerts(service, run_id=run_id)
        assert alert["type"] == "run_failed" and alert["severity"] == "error" and "diverged" in alert["message"]
        assert [d["status"] for d in alert["deliveries"]] == ["pending"]
        fast = AlertSettings(alert_retry_seconds=0.01)
        assert deliver_due(service.ctx.sessions, fast) == 0  # the receiver answers 500 once
        [d] = alerts(service, run_id=run_id)[0]["deliveries"]
        assert (d["status"], d["attempts"], d["response_code"]) == ("pending", 1, 500)
        import time

        time.sleep(0.05)
        assert deliver_due(service.ctx.sessions, fast) == 1
    [d] = alerts(service, run_id=run_id)[0]["deliveries"]
    assert (d["status"], d["attempts"], d["webhook_id"]) == ("sent", 2, h["id"])
    body = json.loads(receiver.requests[-1].body)
    assert (
        body["run_id"] == run_id
        and body["type"] == "run_failed"
        and receiver.requests[-1].headers["X-Scalerl-Delivery"]
    )


def test_delivery_gives_up_after_max_attempts(service: Service) -> None:
    run_id, _ = experiment(service)
    hook(service, "http://127.0.0.1:9/nothing-listens")
    set_status(service, run_id, "running", "claimed")
    set_status(service, run_id, "lost", "lease expired", actor=SYSTEM)
    cfg = AlertSettings(alert_retry_seconds=0.001, alert_max_attempts=2, alert_timeout_seconds=1)
    for _ in range(3):
        deliver_due(service.ctx.sessions, cfg)
        import time

        time.sleep(0.01)
    [d] = alerts(service, type="run_lost")[0]["deliveries"]
    assert d["status"] == "failed" and d["attempts"] == 2 and d["last_error"]


def test_dedupe_counts_repeats_and_rate_limit_suppresses(service: Service) -> None:
    [run_id, _] = experiment(service)
    hook(service, "http://127.0.0.1:9/x")
    cfg = AlertSettings(alert_rate_per_hour=2)
    with service.ctx.sessions.begin() as s:
        exp_id = s.get(Run, run_id).experiment_id  # type: ignore[union-attr]
        for key in ("a", "a", "b", "c"):
            raise_alert(s, "scale_recommended", "info", "t", "m", dedupe_key=key, experiment_id=exp_id, settings=cfg)
    with service.ctx.sessions() as s:
        rows = s.scalars(select(Alert).order_by(Alert.id)).all()
        assert [(a.dedupe_key, a.count, a.suppressed) for a in rows] == [
            ("a", 2, False),
            ("b", 1, False),
            ("c", 1, True),
        ]
        assert s.scalars(select(AlertDelivery.alert_id)).all() == [rows[0].id, rows[1].id]


def test_a_repeat_shows_its_latest_message_and_the_list_is_sorted_by_last_seen(service: Service) -> None:
    """The list showed last_seen_at but was sorted by id, and a re-raised alert kept its first text."""
    [run_id, _] = experiment(service)
    with service.ctx.sessions.begin() as s:
        exp_id = s.get(Run, run_id).experiment_id  # type: ignore[union-attr]
        raise_alert(s, "scale_recommended", "info", "t", "first text", dedupe_key="a", experiment_id=exp_id)
        raise_alert(s, "scale_recommended", "info", "t", "other", dedupe_key="b", experiment_id=exp_id)
    import time

    time.sleep(0.01)
    with service.ctx.sessions.begin() as s:
        raise_alert(s, "scale_recommended", "warning", "t2", "latest text", dedupe_key="a", experiment_id=exp_id)
    listed = alerts(service, experiment_id=exp_id)
    assert [a["message"] for a in listed] == ["latest text", "other"]
    assert (listed[0]["count"], listed[0]["title"], listed[0]["severity"]) == (2, "t2", "warning")
    seen = [a["last_seen_at"] for a in listed]
    assert seen == sorted(seen, reverse=True)


def test_a_planned_shutdown_raises_no_run_lost_alert(service: Service) -> None:
    """Ctrl-C of `scalerl up`/the demo made the worker release its run as ``lost`` and paged everyone
    with "run lost"; only a lease that expired (the reaper, actor ``system``) is a lost worker."""
    released, reaped = experiment(service)
    for run_id in (released, reaped):
        set_status(service, run_id, "running", "claimed")
    set_status(service, released, "lost", "worker w shut down at step 40; the run resumes", actor="worker-token")
    set_status(service, reaped, "lost", "lease of w expired without a heartbeat", actor=SYSTEM)
    lost = alerts(service, type="run_lost")
    assert [a["run_id"] for a in lost] == [reaped]


def test_experiment_finished_recommendations_and_auto_stop_raise_alerts(service: Service) -> None:
    a, b = experiment(service)
    set_status(service, a, "running", "claimed")
    with service.ctx.sessions.begin() as s:
        run = s.get(Run, a)
        assert run is not None
        s.add(
            RecommendationSnapshot(
                experiment_id=run.experiment_id,
                body=[
                    {"run_id": a, "action": "stop", "reason": "ceiling below the best", "numbers": {}},
                    {"run_id": b, "action": "scale", "reason": "best ceiling", "numbers": {}},
                ],
            )
        )
    set_status(service, a, "stopping", "auto_stop: ceiling below the best", actor="auto_stop")
    set_status(service, a, "stopped", "stopped at step 4")
    set_status(service, b, "stopped", "user")
    kinds = [x["type"] for x in reversed(alerts(service))]
    assert kinds == ["early_stop_recommended", "scale_recommended", "early_stop_done", "experiment_finished"]
    assert alerts(service, type="experiment_finished")[0]["data"]["status_counts"] == {"stopped": 2}


def test_forecast_threshold_alerts_once_per_crossing(service: Service) -> None:
    [run_id, _] = experiment(service)
    c = service.client
    bad = c.post("/api/v1/alerts/thresholds", json={"name": "t", "value": 0.5, "factor": 3.0}, headers=service.admin)
    assert bad.status_code == 422 and "forecast factors" in bad.text
    ok = c.post("/api/v1/alerts/thresholds", json={"name": "good", "value": 0.5, "factor": 2.0}, headers=service.admin)
    assert ok.status_code == 201, ok.text

    def fit(mean: float) -> None:
        with service.ctx.sessions.begin() as s:
            preds = [{"compute": 1.0, "mean": mean - 0.1}, {"compute": 2.0, "mean": mean}]
            s.add(
                FitSnapshot(
                    run_id=run_id, kind="full", n_points=5, compute_max=0.5, status="ok", body={"predictions": preds}
                )
            )

    for mean in (0.4, 0.6, 0.7, 0.3, 0.55):
        fit(mean)
    got = alerts(service, type="forecast_threshold")
    assert [round(a["data"]["forecast"], 2) for a in reversed(got)] == [0.6, 0.55]
    assert c.get("/api/v1/alerts/thresholds", headers=service.read).json()[0]["factor"] == 2.0


def test_slack_payload_and_email(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id, _ = experiment(service)
    with smtp_sink() as (port, messages):
        monkeypatch.setenv("SCALERL_SMTP_HOST", "127.0.0.1")
        monkeypatch.setenv("SCALERL_SMTP_PORT", str(port))
        monkeypatch.setenv("SCALERL_SMTP_STARTTLS", "false")
        monkeypatch.setenv("SCALERL_SMTP_TO", '["ops@example.com"]')
        monkeypatch.setenv("SCALERL_PUBLIC_URL", "http://127.0.0.1:8765")
        alert_settings.cache_clear()
        set_status(service, run_id, "running", "claimed")
        set_status(service, run_id, "failed", "out of memory: CUDA")
        assert deliver_due(service.ctx.sessions) == 1
    assert len(messages) == 1 and b"Subject: [scalerl] Run" in messages[0] and b"out of memory" in messages[0]
    with service.ctx.sessions() as s:
        alert = s.scalars(select(Alert)).one()
        slack = slack_payload(alert)
    assert "out of memory" in slack["text"] and slack["blocks"][0]["type"] == "section"
    assert "http://127.0.0.1:8765/experiments/" in slack["blocks"][0]["text"]["text"]
