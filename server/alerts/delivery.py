"""Sending alerts: webhook bodies (our JSON, or a Slack-compatible payload), HMAC signatures, email, and the
retry bookkeeping of stored deliveries.

Signature: ``X-Scalerl-Signature: sha256=<hex>`` where hex = HMAC-SHA256(secret, f"{timestamp}.{body}") and
``timestamp`` is the ``X-Scalerl-Timestamp`` header (Unix seconds); receivers recompute it and reject old
timestamps. Invariants of :func:`deliver_due`: a delivery is claimed (``pending`` → ``sending``) by one process at
a time with a conditional update; nothing is sent inside a database transaction; a failure goes back to
``pending`` with an exponential back-off until ``alert_max_attempts`` tries, then ``failed``; a delivery left in
``sending`` by a process that died is taken up again after ``STALE_SENDING``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any, cast

import httpx
from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session, sessionmaker

from server.alerts.egress import Refused, pin
from server.alerts.settings import AlertSettings, alert_settings
from server.store.alert_models import Alert, AlertDelivery, Webhook
from server.store.models import utcnow

STALE_SENDING = timedelta(minutes=5)
MAX_BACKOFF_SECONDS = 3600.0
SEVERITY_EMOJI = {"info": ":information_source:", "warning": ":warning:", "error": ":x:"}


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None = None
    error: str = ""


def alert_payload(alert: Alert, settings: AlertSettings | None = None) -> dict[str, Any]:
    """The JSON body of a ``json`` webhook (also what the alerts API returns, minus delivery state)."""
    cfg = settings or alert_settings()
    link = None
    if cfg.public_url and alert.experiment_id is not None:
        link = f"{cfg.public_url.rstrip('/')}/experiments/{alert.experiment_id}"
    created = alert.created_at.isoformat() if isinstance(alert.created_at, datetime) else str(alert.created_at)
    return {
        "id": alert.id,
        "type": alert.type,
        "severity": alert.severity,
        "title": alert.title,
        "message": alert.message,
        "experiment_id": alert.experiment_id,
        "run_id": alert.run_id,
        "count": alert.count,
        "data": alert.data,
        "created_at": created,
        "link": link,
    }


def slack_payload(alert: Alert, settings: AlertSettings | None = None) -> dict[str, Any]:
    """A Slack incoming-webhook body (``text`` for notifications, ``blocks`` for the message)."""
    body = alert_payload(alert, settings)
    emoji = SEVERITY_EMOJI.get(alert.severity, "")
    text = f"{emoji} *{alert.title}*\n{alert.message}"
    if body["link"]:
        text += f"\n<{body['link']}|Open in scalerl>"
    context = f"scalerl · {alert.type} · experiment {alert.experiment_id} · run {alert.run_id}"
    return {
        "text": f"{alert.title}: {alert.message}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
        ],
    }


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` of HMAC-SHA256 over ``timestamp.body``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """What a receiver does (constant-time comparison)."""
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


def send_webhook(
    hook: Webhook, alert: Alert, delivery_id: int | None, settings: AlertSettings | None = None
) -> Outcome:
    """POST the alert to ``hook`` once; 2xx is success. Only public addresses are reached unless the settings allow
    more (:mod:`server.alerts.egress`); the receiver's answer body is never read back (only its status code)."""
    cfg = settings or alert_settings()
    payload = slack_payload(alert, cfg) if hook.format == "slack" else alert_payload(alert, cfg)
    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "scalerl-alerts",
        "X-Scalerl-Event": alert.type,
        "X-Scalerl-Timestamp": timestamp,
        "X-Scalerl-Signature": sign(hook.secret, timestamp, body),
    }
    if delivery_id is not None:
        headers["X-Scalerl-Delivery"] = str(delivery_id)
    try:
        target = pin(hook.url, cfg.webhook_allow_private, cfg.webhook_allowed_networks)
    except Refused as exc:
        return Outcome(False, None, f"refused: {exc}"[:2000])
    try:
        with httpx.Client(timeout=cfg.alert_timeout_seconds, follow_redirects=False) as client:
            request = client.build_request(
                "POST", target.url, content=body, headers={**headers, **target.headers}, extensions=target.extensions
            )
            resp = client.send(request, stream=True)  # the body is never read: only the status code is kept
            resp.close()
    except httpx.HTTPError as exc:
        return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:2000])
    if 200 <= resp.status_code < 300:
        return Outcome(True, resp.status_code)
    return Outcome(False, resp.status_code, f"HTTP {resp.status_code}")


def send_email(alert: Alert, settings: AlertSettings | None = None) -> Outcome:
    """Send the alert to ``smtp_to`` through ``smtp_host`` (STARTTLS and login when configured)."""
    cfg = settings or alert_settings()
    msg = EmailMessage()
    msg["Subject"] = f"[scalerl] {alert.title}"
    msg["From"] = cfg.smtp_from
    msg["To"] = ", ".join(cfg.smtp_to)
    msg.set_content(f"{alert.message}\n\n" + json.dumps(alert_payload(alert, cfg), indent=2, default=str))
    try:
        with smtplib.SMTP(cfg.smtp_host, cfg.smtp_port, timeout=cfg.alert_timeout_seconds) as smtp:
            if cfg.smtp_starttls:
                smtp.starttls()
            if cfg.smtp_user:
                smtp.login(cfg.smtp_user, cfg.smtp_password)
            smtp.send_message(msg)
    except (OSError, smtplib.SMTPException) as exc:
        return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:2000])
    return Outcome(True)


def _claim(session: Session, delivery_id: int, now: datetime) -> bool:
    result = session.execute(
        update(AlertDelivery)
        .where(AlertDelivery.id == delivery_id, AlertDelivery.status.in_(("pending", "sending")))
        .where(AlertDelivery.next_attempt_at <= now)
        .values(status="sending", next_attempt_at=now + STALE_SENDING)
    )
    return cast("CursorResult[Any]", result).rowcount == 1


def due_ids(session: Session, now: datetime, limit: int) -> list[int]:
    """Deliveries to try now: pending and due, or stuck in ``sending`` past ``STALE_SENDING``."""
    stmt = (
        select(AlertDelivery.id)
        .where(AlertDelivery.status.in_(("pending", "sending")), AlertDelivery.next_attempt_at <= now)
        .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def deliver_due(sessions: sessionmaker[Session], settings: AlertSettings | None = None, limit: int = 100) -> int:
    """Try every due delivery once (see module invariants); returns how many were sent successfully."""
    cfg = settings or alert_settings()
    sent = 0
    with sessions() as session:
        ids = due_ids(session, utcnow(), limit)
    for delivery_id in ids:
        with sessions.begin() as session:
            if not _claim(session, delivery_id, utcnow()):
                continue
            delivery = session.get(AlertDelivery, delivery_id)
            assert delivery is not None
            alert = delivery.alert
            hook = session.get(Webhook, delivery.webhook_id) if delivery.webhook_id is not None else None
            session.expunge_all()
        if delivery.channel == "email":
            outcome = send_email(alert, cfg) if cfg.email_enabled else Outcome(False, None, "SMTP is not configured")
        elif hook is None or not hook.enabled:
            outcome = Outcome(False, None, "the webhook was disabled or deleted")
        else:
            outcome = send_webhook(hook, alert, delivery_id, cfg)
        with sessions.begin() as session:
            _record(session, delivery_id, outcome, cfg)
        sent += outcome.ok
    return sent


def _record(session: Session, delivery_id: int, outcome: Outcome, cfg: AlertSettings) -> None:
    row = session.get(AlertDelivery, delivery_id)
    if row is None:
        return
    now = utcnow()
    row.attempts += 1
    row.response_code = outcome.status_code
    if outcome.ok:
        row.status, row.delivered_at, row.last_error = "sent", now, ""
        return
    row.last_error = outcome.error
    if row.attempts >= cfg.alert_max_attempts:
        row.status = "failed"
        return
    delay = min(MAX_BACKOFF_SECONDS, cfg.alert_retry_seconds * 2 ** (row.attempts - 1))
    row.status, row.next_attempt_at = "pending", now + timedelta(seconds=delay)
