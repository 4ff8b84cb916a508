"""API tokens (admin scope): create (the secret is shown once), list, revoke; and the calling token itself (any
scope), which the dashboard reads to show read-only pages to a read-only token."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlalchemy import select

from server.lifecycle.runs import NotFound
from server.lifecycle.schemas import TokenCreate, TokenCreated, TokenOut
from server.lifecycle.tokens import SCOPES, Scope, create_token, revoke
from server.routes.deps import Admin, Ctx, DbSession, Reader, ReadSession
from server.routes.errors import ADMIN, not_found
from server.routes.params import TokenId
from server.routes.views import token_out
from server.store.models import ApiToken

router = APIRouter(prefix="/tokens", tags=["tokens"], responses=ADMIN)


class CurrentToken(BaseModel):
    """Who the caller is: a token's name and every scope it grants, or ``anonymous`` (open reads)."""

    name: str
    anonymous: bool = Field(description="True when no token was sent and the server allows open reads.")
    scopes: list[Scope] = Field(description="Every scope granted (admin implies write implies read).")


@router.get(
    "/current",
    response_model=CurrentToken,
)
def current_token(who: Reader) -> CurrentToken:
    """The calling token's name and scopes (any scope may ask; no secret is returned)."""
    return CurrentToken(
        name=who.name,
        anonymous=who.anonymous,
        scopes=[s for s in SCOPES if s in who.scopes],
    )


@router.post("", status_code=201, response_model=TokenCreated)
def create(body: TokenCreate, session: DbSession, _: Admin) -> TokenCreated:
    """Create a token; its secret is in the answer and nowhere else (only a hash is stored)."""
    new = create_token(session, body.name, body.scopes)
    return TokenCreated(**token_out(new.token).model_dump(), token=new.secret)


@router.get("", response_model=list[TokenOut])
def list_tokens(session: ReadSession, _: Admin) -> list[TokenOut]:
    return [token_out(t) for t in session.scalars(select(ApiToken).order_by(ApiToken.id))]


@router.delete("/{token_id}", response_model=TokenOut, responses=not_found("token"))
def revoke_token(token_id: TokenId, session: DbSession, ctx: Ctx, _: Admin) -> TokenOut:
    """Revoke a token at once (it stays listed, with ``revoked_at``); its open event streams in this process end as
    soon as the revocation is committed."""
    row = revoke(session, token_id)
    if row is None:
        raise NotFound(f"token {token_id} does not exist")
    session.info.setdefault("after_commit", []).append(ctx.tokens.forget)  # no remembered answer outlives it
    session.info.setdefault("after_commit", []).append(partial(ctx.streams.revoke, row.token_hash))
    return token_out(row)
