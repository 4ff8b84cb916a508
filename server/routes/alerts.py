"""Alerts: the stored alerts with their deliveries (read), webhooks with a test button and forecast thresholds
(admin: webhooks hold secrets and send data out)."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.alerts.delivery import send_webhook
from server.alerts.hooks import install
from server.alerts.raising import ALERT_TYPES, AlertType
from server.alerts.schemas import (
    AlertOut,
    DeliveryOut,
    TestResult,
    ThresholdCreate,
    ThresholdOut,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
    WebhookUpdate,
)
from server.base.rows import from_row
from server.base.types import MAX_ID
from server.lifecycle.experiments import get_experiment
from server.lifecycle.runs import NotFound
from server.routes.deps import Admin, Ctx, DbSession, Reader
from server.routes.errors import not_found
from server.store.alert_models import Alert, AlertDelivery, AlertThreshold, Webhook
from server.store.db import read_session, where_given
from server.store.models import utcnow

install()

NOT_FOUND = not_found("object")
router = APIRouter(prefix="/alerts", tags=["alerts"])
ObjId = Annotated[int, Query(ge=1, le=MAX_ID)]
PathId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _webhook_out(hook: Webhook) -> WebhookOut:
    return from_row(WebhookOut, hook)


def _delivery_out(d: AlertDelivery) -> DeliveryOut:
    return from_row(DeliveryOut, d)


def _alert_out(alert: Alert, deliveries: list[AlertDelivery]) -> AlertOut:
    return from_row(AlertOut, alert, deliveries=[_delivery_out(d) for d in deliveries])


def _get_webhook(session: Session, webhook_id: int) -> Webhook:
    hook = session.get(Webhook, webhook_id)
    if hook is None:
        raise NotFound(f"webhook {webhook_id} does not exist")
    return hook


@router.get("", response_model=list[AlertOut])
def list_alerts(
    session: DbSession,
    _: Reader,
    experiment_id: ObjId | None = None,
    run_id: ObjId | None = None,
    type: Annotated[AlertType | None, Query(description=f"One of {list(ALERT_TYPES)}")] = None,
    before_id: ObjId | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AlertOut]:
    """Alerts, the most recently raised (or re-raised) first, with the state of each delivery; ``before_id``
    keeps only alerts created before that one."""
    stmt = select(Alert).order_by(Alert.last_seen_at.desc(), Alert.id.desc()).limit(limit)
    stmt = where_given(stmt, (Alert.experiment_id, experiment_id), (Alert.run_id, run_id), (Alert.type, type))
    if before_id is not None:
        stmt = stmt.where(Alert.id < before_id)
    alerts = list(session.scalars(stmt))
    by_alert: dict[int, list[AlertDelivery]] = {a.id: [] for a in alerts}
    if alerts:
        rows = session.scalars(
            select(AlertDelivery).where(AlertDelivery.alert_id.in_(list(by_alert))).order_by(AlertDelivery.id)
        )
        for d in rows:
            by_alert[d.alert_id].append(d)
    return [_alert_out(a, by_alert[a.id]) for a in alerts]


@router.get("/webhooks", response_model=list[WebhookOut])
def list_webhooks(session: DbSession, _: Admin) -> list[WebhookOut]:
    return [_webhook_out(h) for h in session.scalars(select(Webhook).order_by(Webhook.id))]


@router.post("/webhooks", status_code=201, response_model=WebhookCreated, responses=NOT_FOUND)
def create_webhook(body: WebhookCreate, session: DbSession, _: Admin) -> WebhookCreated:
    """Add a webhook; the answer holds its HMAC secret (generated when not given), shown only here."""
    if body.experiment_id is not None:
        get_experiment(session, body.experiment_id)
    secret = body.secret or secrets.token_urlsafe(32)
    hook = Webhook(
        name=body.name,
        url=body.url,
        secret=secret,
        format=body.format,
        events=list(body.events),
        experiment_id=body.experiment_id,
        enabled=body.enabled,
        created_at=utcnow(),
    )
    session.add(hook)
    session.flush()
    return WebhookCreated(**_webhook_out(hook).model_dump(), secret=secret)


@router.get("/webhooks/{webhook_id}", response_model=WebhookOut, responses=NOT_FOUND)
def read_webhook(webhook_id: PathId, session: DbSession, _: Admin) -> WebhookOut:
    return _webhook_out(_get_webhook(session, webhook_id))


@router.patch("/webhooks/{webhook_id}", response_model=WebhookOut, responses=NOT_FOUND)
def update_webhook(webhook_id: PathId, body: WebhookUpdate, session: DbSession, _: Admin) -> WebhookOut:
    """Change some fields (only the ones given)."""
    hook = _get_webhook(session, webhook_id)
    changes = body.model_dump(exclude_unset=True)
    if changes.get("experiment_id") is not None:
        get_experiment(session, changes["experiment_id"])
    for key, value in changes.items():
        if value is None and key != "experiment_id":
            raise HTTPException(422, f"{key}: must not be null")
        setattr(hook, key, list(value) if key == "events" else value)
    return _webhook_out(hook)


@router.delete("/webhooks/{webhook_id}", status_code=204, responses=NOT_FOUND)
def delete_webhook(webhook_id: PathId, session: DbSession, _: Admin) -> Response:
    """Delete a webhook and its pending deliveries (stored alerts stay)."""
    session.delete(_get_webhook(session, webhook_id))
    return Response(status_code=204)


@router.post("/webhooks/{webhook_id}/test", response_model=TestResult, responses=NOT_FOUND)
def test_webhook(webhook_id: PathId, ctx: Ctx, _: Admin) -> TestResult:
    """Send a signed test alert to the webhook now and report what its receiver answered (nothing is stored). The
    webhook is read in autocommit and the session closed before the request goes out: no transaction (on SQLite,
    no write lock) is held while the receiver answers (ingestion waited 9 s behind a slow one)."""
    with read_session(ctx.engine) as session:
        hook = _get_webhook(session, webhook_id)
        session.expunge(hook)
    now = utcnow()
    sample = Alert(
        id=0,
        type="test",
        severity="info",
        experiment_id=hook.experiment_id,
        run_id=None,
        title="Test alert from scalerl",
        message=f"webhook {hook.name!r} is reachable and the signature can be checked",
        data={},
        dedupe_key="test",
        count=1,
        suppressed=False,
        created_at=now,
        last_seen_at=now,
    )
    outcome = send_webhook(hook, sample, None)
    return TestResult(ok=outcome.ok, status_code=outcome.status_code, error=outcome.error)


@router.get("/thresholds", response_model=list[ThresholdOut])
def list_thresholds(session: DbSession, _: Reader) -> list[ThresholdOut]:
    return [_threshold_out(t) for t in session.scalars(select(AlertThreshold).order_by(AlertThreshold.id))]


@router.post("/thresholds", status_code=201, response_model=ThresholdOut, responses=NOT_FOUND)
def create_threshold(body: ThresholdCreate, session: DbSession, ctx: Ctx, _: Admin) -> ThresholdOut:
    """Alert when a run's forecast at ``factor`` × its budget crosses ``value`` (once per crossing)."""
    factors = ctx.settings.forecast_factors
    if not any(abs(body.factor - f) < 1e-9 for f in factors):
        raise HTTPException(422, f"factor: must be one of the server's forecast factors {list(factors)}")
    if body.experiment_id is not None:
        get_experiment(session, body.experiment_id)
    row = AlertThreshold(**body.model_dump(), state={}, created_at=utcnow())
    session.add(row)
    session.flush()
    return _threshold_out(row)


@router.delete("/thresholds/{threshold_id}", status_code=204, responses=NOT_FOUND)
def delete_threshold(threshold_id: PathId, session: DbSession, _: Admin) -> Response:
    row = session.get(AlertThreshold, threshold_id)
    if row is None:
        raise NotFound(f"threshold {threshold_id} does not exist")
    session.delete(row)
    return Response(status_code=204)


def _threshold_out(t: AlertThreshold) -> ThresholdOut:
    return from_row(ThresholdOut, t)
