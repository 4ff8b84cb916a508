"""API tokens (admin scope): create (the secret is shown once), list, revoke."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import select

from server.deps import Admin, DbSession, ReadSession
from server.models import ApiToken
from server.params import TokenId
from server.runs import NotFound
from server.schemas import ErrorOut, TokenCreate, TokenCreated, TokenOut
from server.tokens import create_token, revoke
from server.views import token_out

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "Missing or invalid token"},
    403: {"model": ErrorOut, "description": "Token lacks the admin scope"},
}
router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"], responses=ERRORS)


@router.post("", status_code=201, response_model=TokenCreated)
def create(body: TokenCreate, session: DbSession, _: Admin) -> TokenCreated:
    """Create a token; its secret is in the answer and nowhere else (only a hash is stored)."""
    new = create_token(session, body.name, body.scopes)
    return TokenCreated(**token_out(new.token).model_dump(), token=new.secret)


@router.get("", response_model=list[TokenOut])
def list_tokens(session: ReadSession, _: Admin) -> list[TokenOut]:
    return [token_out(t) for t in session.scalars(select(ApiToken).order_by(ApiToken.id))]


@router.delete("/{token_id}", response_model=TokenOut, responses={404: {"model": ErrorOut}})
def revoke_token(token_id: TokenId, session: DbSession, _: Admin) -> TokenOut:
    """Revoke a token at once (it stays listed, with ``revoked_at``)."""
    row = revoke(session, token_id)
    if row is None:
        raise NotFound(f"token {token_id} does not exist")
    return token_out(row)
