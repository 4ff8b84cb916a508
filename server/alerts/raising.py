"""Creating alerts inside the caller's transaction: de-duplication, per-experiment rate limit, and deliveries.

Invariants: an alert of a given ``dedupe_key`` is stored once per de-duplication window (repeats increment
``count`` and ``last_seen_at`` and replace the title, severity, message and data with the latest, but queue no new
delivery); when an experiment already had ``alert_rate_per_hour`` delivered alerts in the past hour, a new alert is
stored with ``suppressed`` and gets no deliveries; otherwise it gets one ``pending`` delivery per enabled webhook
whose ``events`` (empty = all) and ``experiment_id`` (empty = all) match, plus one email delivery when SMTP is
configured.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal, get_args

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from server.alerts.settings import AlertSettings, alert_settings
from server.store.alert_models import Alert, AlertDelivery, Webhook
from server.store.models import utcnow

AlertType = Literal[
    "early_stop_recommended",
    "early_stop_done",
    "scale_recommended",
    "run_failed",
    "run_lost",
    "experiment_finished",
    "forecast_threshold",
]
ALERT_TYPES: tuple[AlertType, ...] = get_args(AlertType)
Severity = Literal["info", "warning", "error"]


def raise_alert(
    session: Session,
    type_: AlertType,
    severity: Severity,
    title: str,
    message: str,
    *,
    dedupe_key: str,
    experiment_id: int | None = None,
    run_id: int | None = None,
    data: dict[str, Any] | None = None,
    settings: AlertSettings | None = None,
) -> Alert:
    """Store (or count a repeat of) an alert and queue its deliveries; see the module invariants."""
    cfg = settings or alert_settings()
    now = utcnow()
    with session.no_autoflush:
        unflushed = [o for o in session.new if isinstance(o, Alert)]  # raised earlier in this same flush
        window = now - timedelta(seconds=cfg.alert_dedupe_seconds)
        seen = next((a for a in reversed(unflushed) if a.dedupe_key == dedupe_key[:300]), None) or session.scalar(
            select(Alert)
            .where(Alert.dedupe_key == dedupe_key[:300], Alert.last_seen_at >= window)
            .order_by(Alert.id.desc())
            .limit(1)
        )
        if seen is not None:  # a repeat: counted, and it shows what was said last
            seen.count += 1
            seen.last_seen_at = now
            seen.title = title[:300]
            seen.message = message
            seen.severity = severity
            seen.resolved_at = seen.resolution = None  # advised again: open again
            if data:
                seen.data = data
            return seen
        recent = 0
        if experiment_id is not None:
            stored = session.scalar(
                select(func.count(Alert.id)).where(
                    Alert.experiment_id == experiment_id,
                    Alert.suppressed.is_(False),
                    Alert.created_at >= now - timedelta(hours=1),
                )
            )
            recent = (stored or 0) + sum(a.experiment_id == experiment_id and not a.suppressed for a in unflushed)
        alert = Alert(
            type=type_,
            severity=severity,
            experiment_id=experiment_id,
            run_id=run_id,
            title=title[:300],
            message=message,
            data=data or {},
            dedupe_key=dedupe_key[:300],
            count=1,
            suppressed=recent >= cfg.alert_rate_per_hour,
            created_at=now,
            last_seen_at=now,
        )
        session.add(alert)
        if alert.suppressed:
            return alert
        hooks = session.scalars(
            select(Webhook).where(
                Webhook.enabled.is_(True),
                or_(Webhook.experiment_id.is_(None), Webhook.experiment_id == experiment_id),
            )
        ).all()
    for hook in hooks:
        if not hook.events or type_ in hook.events:
            session.add(AlertDelivery(alert=alert, channel="webhook", webhook_id=hook.id, next_attempt_at=now))
    if cfg.email_enabled:
        session.add(AlertDelivery(alert=alert, channel="email", next_attempt_at=now))
    return alert
