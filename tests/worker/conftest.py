"""Fixtures for the worker tests. The fault tests need PostgreSQL and ``redis-server``; without them they are
skipped with the reason (CI has both)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import migrated_pg_database
from tests.services import unavailable
from tests.worker.cluster import Cluster, RedisServer, make_cluster

STEPS = 200  # long enough that a kill after step 2 lands mid-run on a fast, quiet machine


@pytest.fixture(scope="module")
def pg() -> Iterator[str]:
    with migrated_pg_database() as url:
        yield url


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed")
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


def _token(database_url: str) -> str:
    from server.lifecycle.tokens import create_token
    from server.store.db import make_engine, session_factory

    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            return create_token(session, "test-admin", ["admin"]).secret
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def cluster(pg: str, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Server, a cpu worker and a gpu worker on Postgres + our Redis, with short leases and heartbeats."""
    home = tmp_path_factory.mktemp("home")
    c = make_cluster(
        home,
        pg,
        redis_server.url,
        _token(pg),
        STEPS,
        # Longer than a server restart on a loaded machine (the kill -9 test restarts it and must not lose the lease).
        SCALERL_LEASE_SECONDS="12",
        SCALERL_STOP_GRACE_SECONDS="20",
        SCALERL_ALERT_RETRY_SECONDS="0.5",
        SCALERL_WEBHOOK_ALLOW_PRIVATE="true",  # the test receiver listens on 127.0.0.1
    )
    try:
        c.start_server()
        c.start_worker("cpu")
        c.start_worker("gpu")
        yield c
    finally:
        c.stop_all()


def logs_of(cluster: Cluster) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(Path(cluster.logs).glob("*.log")))
