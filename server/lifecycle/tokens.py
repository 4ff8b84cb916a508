"""API tokens: created with a random secret shown once, stored only as a SHA-256 hash.

Scopes are ordered: ``admin`` implies ``write`` implies ``read``. Revoked tokens are kept (with ``revoked_at``).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal, cast

from sqlalchemy import Engine, Table, select
from sqlalchemy.orm import Session

from server.store.models import ApiToken, utcnow

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
TOKEN_PREFIX = "srl_"


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def implied_scopes(scopes: list[Scope]) -> set[Scope]:
    """Every scope granted by ``scopes`` (admin ⊃ write ⊃ read)."""
    top = max((SCOPES.index(s) for s in scopes), default=-1)
    return set(SCOPES[: top + 1])


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str


def create_token(session: Session, name: str, scopes: list[Scope]) -> NewToken:
    """Store a new token; the returned ``secret`` is the only copy of the plaintext."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, prefix=secret[:12], token_hash=hash_token(secret), scopes=",".join(sorted(set(scopes))))
    session.add(row)
    session.flush()
    return NewToken(row, secret)


@dataclass(frozen=True)
class TokenInfo:
    name: str
    scopes: list[Scope]


def lookup_active(engine: Engine, secret: str) -> TokenInfo | None:
    """The active token with this secret: one autocommit query (this runs on every request)."""
    t = cast(Table, ApiToken.__table__)
    stmt = select(t.c.name, t.c.scopes).where(t.c.token_hash == hash_token(secret), t.c.revoked_at.is_(None))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        row = conn.execute(stmt).first()
    if row is None:
        return None
    return TokenInfo(row.name, [s for s in SCOPES if s in row.scopes.split(",")])


def revoke(session: Session, token_id: int) -> ApiToken | None:
    row = session.get(ApiToken, token_id)
    if row is not None and row.revoked_at is None:
        row.revoked_at = utcnow()
    return row


def token_scopes(row: ApiToken) -> list[Scope]:
    return [s for s in SCOPES if s in row.scopes.split(",")]


def has_active_tokens(session: Session) -> bool:
    return session.scalar(select(ApiToken.id).where(ApiToken.revoked_at.is_(None)).limit(1)) is not None
