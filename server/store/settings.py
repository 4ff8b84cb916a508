"""Typed service configuration, read once from the environment (``SCALERL_*``) and ``.env``.

Invariants: ``database_url`` is always set after validation (the embedded default is a SQLite file under
``home``); ``open_reads`` is only allowed when the server binds to a loopback address.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rl_core.contracts.run_dir import default_home

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: Default writes in flight per process: SQLite (one writer, in this process) and a database server.
SQLITE_WRITE_SLOTS = 8
SERVER_DB_WRITE_SLOTS = 32


class Settings(BaseSettings):
    """Everything the service needs; each field is ``SCALERL_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="SCALERL_", env_file=".env", extra="ignore")

    home: Path = Field(default_factory=default_home, description="Folder for the embedded database and credentials.")
    database_url: str = Field(default="", description="SQLAlchemy URL; empty means sqlite:///<home>/scalerl.db.")
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 8765
    open_reads: bool = Field(default=False, description="Serve GET endpoints without a token (loopback only).")
    max_points_per_batch: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    max_body_bytes: Annotated[int, Field(ge=1024)] = 8 * 1024 * 1024
    lease_seconds: Annotated[float, Field(gt=0)] = 120.0
    reaper_interval_seconds: Annotated[float, Field(gt=0)] = 5.0
    silent_after_heartbeats: Annotated[float, Field(ge=2.0, le=1000.0)] = 6.0
    """A run of its own trainer that promised a heartbeat every h seconds becomes ``lost`` (with an alert) after
    this × h seconds without a report; it is ``running`` again when it reports."""
    deliver_alerts: bool = True
    """Deliver webhook and e-mail alerts from the server itself (every ``reaper_interval_seconds``), so a user who
    runs only ``scalerl server`` gets them; deliveries are claimed row by row, so the cpu worker's ``deliver_alerts``
    task may run beside it without sending anything twice."""
    interval_refit: bool = Field(default=True, description="Refit with posterior intervals off the request path.")
    interval_refit_min_seconds: Annotated[float, Field(ge=0)] = 30.0
    """An experiment's interval refits and recommendations run at most this often."""
    point_refit_seconds: Annotated[float, Field(ge=0, le=3600)] = 1.0
    """A run's point fit is refitted off the request path at most this often, however many batches arrive; a POST's
    answer carries the fit as stored and says whether a newer one is pending (``fit_pending``)."""
    fit_workers: Annotated[int, Field(ge=0, le=64)] = 1
    """Processes for the full fits with intervals (0: in the refit thread, sharing the server's GIL)."""
    forecast_factors: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)
    """Each fit snapshot stores predictions at these multiples of the run's budget (or of its compute so far)."""
    sse_poll_seconds: Annotated[float, Field(gt=0)] = 1.0
    parse_workers: Annotated[int, Field(ge=1, le=16)] = 1
    """Threads that parse YAML and large JSON bodies (their own pool, not the one every endpoint shares)."""
    parse_queue: Annotated[int, Field(ge=0, le=1024)] = 8
    """Bodies that may wait for a parse thread; one more is answered 503 with ``Retry-After`` at once."""
    max_inflight_writes: Annotated[int | None, Field(ge=0, le=10_000)] = None
    """Writes (POST, PUT, PATCH, DELETE under ``/api/``, once authenticated and their body read) handled at once by
    this process; the others wait in order (``write_queue_seconds``); 0: no limit. Default (None): 8 on SQLite,
    32 on PostgreSQL. SQLite writes one transaction at a time inside this process, so fewer writes in flight wait
    less behind one another and leave the GIL to the event loop (`/healthz` p99 near 0.1 s at 100 clients); a
    PostgreSQL transaction works in the database's own processes, and at 100 clients 8 in flight gave 0.87x the
    points/s of no limit, 32 gave 1.0x (docs/benchmarks.md)."""
    write_queue_seconds: Annotated[float, Field(ge=0, le=60)] = 2.0
    """An authenticated write whose body has arrived waits in order up to this long for one of the
    ``max_inflight_writes`` slots before it is shed (503 with ``Retry-After``); 0 sheds at once when every slot is
    busy. 2: at 100 clients posting without pause the wait stays under 1 s except while a refit holds the CPU."""
    body_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 10.0
    """A write's body must arrive within this many seconds (plus one second per ``min_body_rate`` bytes), else 408
    and the connection is closed; no slot is held while it arrives."""
    min_body_rate: Annotated[int, Field(ge=1)] = 64 * 1024
    """Bytes per second a large body must keep up (see ``body_timeout_seconds``)."""
    header_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 10.0
    """A connection's request head (line and headers) must arrive within this many seconds, else it is closed."""
    keep_alive_seconds: Annotated[float, Field(gt=0, le=600)] = 5.0
    """An idle keep-alive connection is closed after this many seconds."""
    max_streams_per_token: Annotated[int, Field(ge=1, le=100_000)] = 64
    """Event streams one token may hold open at once in this process; one more is answered 429."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names the server answers to (the Host header; JSON list; ``*.example.com`` for subdomains, ``*`` for
    any); empty: localhost, 127.0.0.1, ::1 and ``host``. Any other Host gets a JSON 400 (DNS rebinding)."""
    runs_dir: Path | None = Field(
        default=None, description="The workers' run directories (SCALERL_RUNS_DIR); default <home>/runs."
    )
    """The dashboard shows a run's engine log from ``<runs_dir>/run-<id>/engine.log`` when this server can read it."""
    allowed_data_roots: tuple[str, ...] = ()
    """Folders under which a run's task/model may name local files (JSON list); empty: no local paths accepted."""

    @model_validator(mode="after")
    def _resolve(self) -> Settings:
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'scalerl.db'}"
        if self.runs_dir is None:
            self.runs_dir = self.home / "runs"
        if self.open_reads and self.host not in LOOPBACK_HOSTS:
            raise ValueError(
                f"open_reads is only allowed on a loopback host ({sorted(LOOPBACK_HOSTS)}), got {self.host}"
            )
        return self

    @property
    def trusted_hosts(self) -> tuple[str, ...]:
        """The effective ``allowed_hosts`` (the default list when none is set)."""
        if self.allowed_hosts:
            return self.allowed_hosts
        defaults = ("localhost", "127.0.0.1", "::1")
        if self.host in ("0.0.0.0", "::"):  # every interface: also the machine's own name
            return (*defaults, socket.gethostname())
        return defaults if self.host in defaults else (*defaults, self.host)

    @property
    def write_slots(self) -> int:
        """The effective ``max_inflight_writes`` (its default by database when unset)."""
        if self.max_inflight_writes is not None:
            return self.max_inflight_writes
        return SQLITE_WRITE_SLOTS if self.database_url.startswith("sqlite") else SERVER_DB_WRITE_SLOTS

    @property
    def credentials_path(self) -> Path:
        return self.home / "credentials.json"

    @property
    def embedded(self) -> bool:
        """True for the embedded default: the SQLite database under ``home``."""
        return self.database_url == f"sqlite:///{self.home / 'scalerl.db'}"
