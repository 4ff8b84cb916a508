"""Tokens with scopes: hashed at rest, 401 without/with a bad token, 403 without the scope, revocation at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from server.store.models import ApiToken
from tests.server.conftest import Service, make_settings, start_service
from tests.server.helpers import sweep_doc


def test_healthz_is_open(service: Service) -> None:
    r = service.client.get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.headers["server-timing"].startswith("app;dur=")


def test_reads_and_writes_need_tokens(service: Service) -> None:
    c = service.client
    assert c.get("/api/v1/experiments").status_code == 401
    assert "missing API token" in c.get("/api/v1/experiments").json()["detail"]
    bad = {"Authorization": "Bearer srl_not-a-token"}
    assert c.get("/api/v1/experiments", headers=bad).status_code == 401
    assert c.get("/api/v1/experiments", headers=service.read).status_code == 200
    r = c.post("/api/v1/experiments", json=sweep_doc(), headers=service.read)
    assert r.status_code == 403
    assert "'write'" in r.json()["detail"]
    assert c.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).status_code == 201
    assert c.get("/api/v1/tokens", headers=service.write).status_code == 403


def test_a_token_can_read_its_own_name_and_scopes(service: Service) -> None:
    """The dashboard shows read-only pages to a read-only token and Settings says the scope."""
    c = service.client
    assert c.get("/api/v1/tokens/current").status_code == 401
    read = c.get("/api/v1/tokens/current", headers=service.read).json()
    assert read["scopes"] == ["read"] and read["anonymous"] is False and read["name"]
    assert c.get("/api/v1/tokens/current", headers=service.write).json()["scopes"] == ["read", "write"]
    assert c.get("/api/v1/tokens/current", headers=service.admin).json()["scopes"] == ["read", "write", "admin"]


def test_token_lifecycle_and_hashing(service: Service) -> None:
    c = service.client
    r = c.post("/api/v1/tokens", json={"name": "ci", "scopes": ["write"]}, headers=service.admin)
    assert r.status_code == 201
    body = r.json()
    secret = body["token"]
    assert secret.startswith("srl_") and body["scopes"] == ["write"]
    with service.ctx.sessions() as session:
        stored = session.scalars(select(ApiToken.token_hash)).all()
    assert secret not in stored and all(len(h) == 64 for h in stored)
    h = {"Authorization": f"Bearer {secret}"}
    assert c.get("/api/v1/runs", headers=h).status_code == 200  # write implies read
    listed = c.get("/api/v1/tokens", headers=service.admin).json()
    assert "token" not in listed[0] and any(t["name"] == "ci" for t in listed)
    assert c.delete(f"/api/v1/tokens/{body['id']}", headers=service.admin).json()["revoked_at"] is not None
    assert c.get("/api/v1/runs", headers=h).status_code == 401
    assert c.delete("/api/v1/tokens/99999", headers=service.admin).status_code == 404
    bad = c.post("/api/v1/tokens", json={"name": "x", "scopes": ["root"]}, headers=service.admin)
    assert bad.status_code == 422


def test_open_reads_only_on_loopback(tmp_path: Path, sqlite_template: Path) -> None:
    import shutil

    db = tmp_path / "open.db"
    shutil.copy(sqlite_template, db)
    gen = start_service(make_settings(f"sqlite:///{db}", tmp_path, open_reads=True))
    svc = next(gen)
    try:
        assert svc.client.get("/api/v1/experiments").status_code == 200
        assert svc.client.post("/api/v1/experiments", json=sweep_doc()).status_code == 401
        me = svc.client.get("/api/v1/tokens/current").json()
        assert me == {"name": "anonymous", "anonymous": True, "scopes": ["read"]}
    finally:
        gen.close()
    with pytest.raises(ValidationError, match="loopback"):
        make_settings(f"sqlite:///{db}", tmp_path, open_reads=True, host="0.0.0.0")
