"""Alert tables, on the service's ``Base`` (migration ``0002``).

Invariants: an alert row is never deleted by the service; a repeat of the same ``dedupe_key`` inside the
de-duplication window increments ``count`` instead of creating a row; deliveries are created with the alert (one per
matching webhook, one for email) and only move ``pending`` → ``sending`` → ``sent`` | ``failed`` (or back to
``pending`` with a later ``next_attempt_at`` after a failed try).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.store.models import Base, BigId, utcnow


class Webhook(Base):
    __tablename__ = "alert_webhooks"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(String(2000))
    secret: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(10), default="json")
    events: Mapped[list[Any]] = mapped_column(JSON, default=list)
    experiment_id: Mapped[int | None] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), nullable=True, index=True
    )
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Alert(Base):
    __tablename__ = "alerts"
    __table_args__ = (Index("ix_alerts_dedupe_key_last_seen_at", "dedupe_key", "last_seen_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    type: Mapped[str] = mapped_column(String(40))
    severity: Mapped[str] = mapped_column(String(10))
    experiment_id: Mapped[int | None] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), nullable=True, index=True
    )
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    title: Mapped[str] = mapped_column(String(300))
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    dedupe_key: Mapped[str] = mapped_column(String(300))
    count: Mapped[int] = mapped_column(Integer, default=1)
    suppressed: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: Set when a later assessment withdraws the advice (e.g. a stop it no longer recommends), with the reason.
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    resolution: Mapped[str | None] = mapped_column(Text, nullable=True)


class AlertDelivery(Base):
    __tablename__ = "alert_deliveries"
    __table_args__ = (Index("ix_alert_deliveries_status_next_attempt_at", "status", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"), index=True)
    channel: Mapped[str] = mapped_column(String(10))
    webhook_id: Mapped[int | None] = mapped_column(
        ForeignKey("alert_webhooks.id", ondelete="CASCADE"), nullable=True, index=True
    )
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_error: Mapped[str] = mapped_column(Text, default="")
    response_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    alert: Mapped[Alert] = relationship()


class AlertThreshold(Base):
    """Alert when a run's forecast at ``factor`` × its budget crosses ``value`` (``above`` or ``below``).

    ``state`` maps run id → whether the forecast was on the alerting side at the last full fit, so an alert fires
    once per crossing, not once per fit.
    """

    __tablename__ = "alert_thresholds"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    experiment_id: Mapped[int | None] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), nullable=True, index=True
    )
    direction: Mapped[str] = mapped_column(String(10))
    value: Mapped[float] = mapped_column(Float)
    factor: Mapped[float] = mapped_column(Float, default=1.0)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
