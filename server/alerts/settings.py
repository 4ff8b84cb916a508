"""Alert configuration (``SCALERL_ALERT_*`` and ``SCALERL_SMTP_*``), read from the environment once per process.

Email is on only when ``smtp_host`` and at least one ``smtp_to`` address are set.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AlertSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCALERL_", env_file=".env", extra="ignore")

    alert_dedupe_seconds: Annotated[float, Field(ge=0)] = 6 * 3600.0
    """A repeat of the same alert (same event, run or experiment) inside this window only increments its count."""
    alert_rate_per_hour: Annotated[int, Field(ge=1)] = 60
    """At most this many alerts per experiment per hour are delivered; later ones are stored as suppressed."""
    alert_max_attempts: Annotated[int, Field(ge=1, le=50)] = 6
    alert_retry_seconds: Annotated[float, Field(gt=0)] = 10.0
    """First retry delay; each further retry doubles it (capped at one hour)."""
    alert_timeout_seconds: Annotated[float, Field(gt=0, le=120)] = 10.0
    webhook_allow_private: bool = False
    """Let webhooks reach loopback, private, link-local and other non-public addresses (a receiver on your own
    network); off: such URLs are refused at send time (server-side request forgery)."""
    webhook_allowed_networks: tuple[str, ...] = ()
    """Host names and networks (CIDR) webhooks may reach even though they are not public (a JSON list)."""
    public_url: str = Field(default="", description="Base URL of the dashboard, for links in alerts.")
    smtp_host: str = ""
    smtp_port: Annotated[int, Field(ge=1, le=65535)] = 587
    smtp_user: str = ""
    smtp_password: str = ""
    smtp_starttls: bool = True
    smtp_from: str = "scalerl@localhost"
    smtp_to: list[str] = Field(default_factory=list)

    @property
    def email_enabled(self) -> bool:
        return bool(self.smtp_host and self.smtp_to)


@lru_cache(maxsize=1)
def alert_settings() -> AlertSettings:
    """The process's alert settings (``alert_settings.cache_clear()`` re-reads the environment)."""
    return AlertSettings()
