"""Worker configuration (``SCALERL_*``), typed and validated once.

Defaults are the embedded all-in-one: the server at ``http://127.0.0.1:8765`` with the token saved in
``<home>/credentials.json``, the database SQLite under ``home``, and a broker that needs no server (kombu's
SQLAlchemy transport on ``<home>/broker.sqlite``). Production sets ``SCALERL_BROKER_URL=redis://...``,
``SCALERL_SERVER_URL``, ``SCALERL_TOKEN`` and ``SCALERL_DATABASE_URL`` (the last only for ``cpu`` workers).

Invariants: ``lease_seconds`` exceeds ``heartbeat_seconds`` by at least a factor 3 (two missed heartbeats never lose
a run); the broker's ``visibility_timeout`` is longer than a lease (a message is only redelivered for a run that can
no longer be running).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rl_core.contracts.run_dir import default_home


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCALERL_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=default_home)
    database_url: str = Field(default="", description="Used by cpu workers (supervision, alerts); empty: SQLite.")
    broker_url: str = Field(default="", description="Celery broker; empty: sqla+sqlite:///<home>/broker.sqlite.")
    server_url: str = Field(default="", description="The REST service; empty: the saved URL or 127.0.0.1:8765.")
    token: str = Field(default="", description="API token with write scope; empty: the saved credentials.")
    runs_dir: Path | None = Field(default=None, description="Run directories (share it between GPU machines).")
    worker_name: str = Field(default="", description="Lease owner name; empty: worker@<hostname>:<pid>.")
    lease_seconds: Annotated[float, Field(ge=3, le=86400)] = 60.0
    heartbeat_seconds: Annotated[float, Field(gt=0, le=3600)] = 10.0
    stop_grace_seconds: Annotated[float, Field(gt=0, le=3600)] = 60.0
    """After SIGTERM the engine has this long to reach a step boundary and checkpoint; then SIGKILL."""
    drain_seconds: Annotated[float, Field(gt=0)] = 600.0
    """After the engine exited, how long the worker keeps retrying to deliver its last points and status."""
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 5
    """A lost run is queued again automatically while it was started fewer times than this."""
    poll_seconds: Annotated[float, Field(gt=0, le=10)] = 0.5
    report_batch: Annotated[int, Field(ge=1, le=10_000)] = 500
    max_backoff_seconds: Annotated[float, Field(gt=0)] = 30.0
    supervise_seconds: Annotated[float, Field(gt=0)] = 2.0
    redispatch_seconds: Annotated[float, Field(gt=0)] = 900.0
    """A run still queued this long after its message was published gets another message (lost broker data)."""
    visibility_timeout: Annotated[float, Field(gt=0)] = 7 * 24 * 3600.0
    engine_template: Path | None = Field(default=None, description="YAML run-config fragment for every run.")
    allowed_data_roots: tuple[str, ...] = Field(
        default=(), description="Folders a run's task/model paths must lie under (JSON list); empty: none allowed."
    )
    engine_device: str = Field(default="cpu", description="cpu, cuda or cuda:N for the engine.")
    engine_steps: Annotated[int, Field(ge=1)] = 1_000_000
    """Step cap of every run; the compute budget normally ends it first."""
    engine_python: str = Field(default="", description="Interpreter that runs the engine; empty: this one.")
    run_storage: str = Field(
        default="",
        description="Where checkpoints go so that a run resumes on any host (an fsspec URL: a path, sftp://, "
        "s3://, gs://, az://); empty: the runs_dir alone (shared between hosts only if it is on shared storage).",
    )
    run_storage_options: dict[str, Any] = Field(
        default_factory=dict, description="The storage filesystem's options (JSON): keys, known_hosts, endpoint."
    )
    run_storage_keep: Annotated[int, Field(ge=1, le=100)] = 2
    """Checkpoints of a run kept in the run storage (the newest)."""
    run_storage_final_seconds: Annotated[float, Field(gt=0)] = 120.0
    """At an attempt's end, how long the worker retries uploading the last checkpoint before it reports."""

    @model_validator(mode="after")
    def _resolve(self) -> WorkerSettings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'scalerl.db'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{self.home / 'broker.sqlite'}"
        if self.runs_dir is None:
            self.runs_dir = self.home / "runs"
        saved = _saved_credentials(self.home)
        if not self.server_url:
            self.server_url = saved.get("url", "http://127.0.0.1:8765")
        self.server_url = self.server_url.rstrip("/")
        if not self.token:
            self.token = saved.get("token", "")
        if self.lease_seconds < 3 * self.heartbeat_seconds:
            raise ValueError(
                f"lease_seconds ({self.lease_seconds}) must be at least 3 × "
                f"heartbeat_seconds ({self.heartbeat_seconds})"
            )
        if self.visibility_timeout <= self.lease_seconds:
            raise ValueError("visibility_timeout must be longer than lease_seconds")
        if self.run_storage:
            from worker.storage import check_url

            check_url(self.run_storage)
        if self.engine_device != "cpu" and self.engine_device != "cuda" and not self.engine_device.startswith("cuda:"):
            raise ValueError(f"engine_device must be cpu, cuda or cuda:N, got {self.engine_device!r}")
        return self

    @property
    def broker_kind(self) -> Literal["redis", "sqla", "other"]:
        if self.broker_url.startswith(("redis://", "rediss://")):
            return "redis"
        if self.broker_url.startswith("sqla+"):
            return "sqla"
        return "other"

    @property
    def run_root(self) -> Path:
        assert self.runs_dir is not None
        return self.runs_dir


def _saved_credentials(home: Path) -> dict[str, Any]:
    path = home / "credentials.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
