"""Request and response models of the alerts API (``/api/v1/alerts``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from server.alerts.raising import AlertType
from server.base.types import DbId, Text

WebhookFormat = Literal["json", "slack"]
Url = Annotated[Text, Field(min_length=8, max_length=2000)]
Secret = Annotated[Text, Field(min_length=16, max_length=200)]


def _http_url(value: str) -> str:
    """An http(s) URL that a delivery can be sent to: a host, and a port (if any) in 1..65535."""
    if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise ValueError("must be an http:// or https:// URL without spaces")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:  # a bad port or IPv6 literal
        raise ValueError(f"must be a valid http(s) URL ({exc})") from None
    if not parts.hostname:
        raise ValueError("must be an http(s) URL with a host name or address (https://host[:port]/path)")
    if port == 0:
        raise ValueError("must name a port in 1..65535 (or none)")
    return value


class _Strict(BaseModel):
    """Request bodies: unknown keys and wrong types are refused (``"0.5"`` or ``true`` is not a number, ``"yes"`` is
    not a boolean), as everywhere in the API."""

    model_config = ConfigDict(extra="forbid", strict=True)


class WebhookCreate(_Strict):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    url: Url
    secret: Secret | None = Field(default=None, description="HMAC key; generated (and shown once) when omitted.")
    format: WebhookFormat = Field(default="json", description="json: scalerl's body; slack: Slack-compatible body.")
    events: list[AlertType] = Field(default_factory=list, description="Alert types to send; empty means all.")
    experiment_id: DbId | None = Field(default=None, description="Only this experiment's alerts; empty means all.")
    enabled: bool = True

    _url = field_validator("url")(_http_url)


class WebhookUpdate(_Strict):
    name: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    url: Url | None = None
    secret: Secret | None = None
    format: WebhookFormat | None = None
    events: list[AlertType] | None = None
    experiment_id: DbId | None = None
    enabled: bool | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value)


class WebhookOut(BaseModel):
    id: int
    name: str
    url: str
    format: WebhookFormat
    events: list[str]
    experiment_id: int | None
    enabled: bool
    created_at: datetime


class WebhookCreated(WebhookOut):
    secret: str = Field(description="The HMAC key; returned only by create (and by an update that sets it).")


class TestResult(BaseModel):
    ok: bool
    status_code: int | None
    error: str


class DeliveryOut(BaseModel):
    id: int
    channel: Literal["webhook", "email"]
    webhook_id: int | None
    status: Literal["pending", "sending", "sent", "failed"]
    attempts: int
    next_attempt_at: datetime
    last_error: str
    response_code: int | None
    delivered_at: datetime | None


class AlertOut(BaseModel):
    id: int
    type: str
    severity: Literal["info", "warning", "error"]
    title: str
    message: str
    experiment_id: int | None
    run_id: int | None
    data: dict[str, Any]
    count: int = Field(description="How many times the same alert was raised inside the de-duplication window.")
    suppressed: bool = Field(description="Stored but not delivered: the experiment's alert rate limit was reached.")
    created_at: datetime
    last_seen_at: datetime
    resolved_at: datetime | None = Field(
        default=None, description="When a later assessment withdrew the advice (e.g. no longer advises a stop)."
    )
    resolution: str | None = Field(default=None, description="Why it was withdrawn: the later assessment's advice.")
    deliveries: list[DeliveryOut]


class ThresholdCreate(_Strict):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    experiment_id: DbId | None = Field(default=None, description="Only this experiment's runs; empty means all.")
    direction: Literal["above", "below"] = "above"
    value: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
    factor: Annotated[float, Field(gt=0.0, le=1000.0, allow_inf_nan=False)] = Field(
        default=1.0, description="Where the forecast is read: this multiple of the run's budget (a forecast factor)."
    )


class ThresholdOut(BaseModel):
    id: int
    name: str
    experiment_id: int | None
    direction: Literal["above", "below"]
    value: float
    factor: float
    created_at: datetime
