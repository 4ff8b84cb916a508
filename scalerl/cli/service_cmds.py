"""``scalerl server``, ``scalerl db`` and ``scalerl token``: running the service (using it from CI: ci_cmds.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from scalerl.cli.errors import fail, require_shipped_data


@contextmanager
def _database_errors(what: str) -> Iterator[None]:
    """Database and migration failures become one ``error:`` line (exit 2)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        fail(f"{what}: {reason} (is the database reachable and migrated? `scalerl db upgrade`)")


def _settings(**overrides: Any) -> Any:
    from pydantic import ValidationError

    from server.store.settings import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        fail("invalid settings: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))


def graceful_on_hangup() -> None:
    """SIGHUP (the terminal closed, ``kill -HUP``) shuts the server down as SIGTERM does: requests finish, the
    background fitters and their processes stop (it used to end the process at once, leaking semaphores)."""
    import os
    import signal

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda *_: os.kill(os.getpid(), signal.SIGTERM))


@click.command("server")
@click.option("--host", default=None, help="Bind address (default 127.0.0.1, or SCALERL_HOST).")
@click.option("--port", type=int, default=None, help="Port (default 8765, or SCALERL_PORT).")
@click.option("--database-url", default=None, help="SQLAlchemy URL (default: SQLite under SCALERL_HOME).")
@click.option("--open-reads", is_flag=True, default=None, help="Serve GET endpoints without a token (loopback only).")
def server_cmd(host: str | None, port: int | None, database_url: str | None, open_reads: bool | None) -> None:
    """Run the REST service (migrates the database first; creates a first admin token if none exists)."""
    settings = _settings(host=host, port=port, database_url=database_url, open_reads=open_reads)
    require_shipped_data()
    import uvicorn

    from scalerl.app import create_app
    from server.runtime.bootstrap import initialise
    from worker.embedded import port_problem

    busy = port_problem(settings.host, settings.port)
    if busy:  # before the token is saved: credentials must never name another server's URL
        fail(f"cannot listen on {settings.host}:{settings.port}: {busy}")
    with _database_errors("cannot prepare the database"):
        written = initialise(settings)
    if written is not None:
        click.echo(f"created the first API token (admin); saved with the URL in {written}", err=True)
    from server.app import serve_options

    graceful_on_hangup()
    # JSON 414/431 for over-long heads (not a TCP reset), a deadline per head, the idle keep-alive.
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, **serve_options(settings))


@click.group("db")
def db_group() -> None:
    """Database migrations."""


@db_group.command("upgrade")
@click.option("--database-url", default=None, help="SQLAlchemy URL (default: SCALERL_DATABASE_URL or SQLite).")
@click.option("--revision", default="head", show_default=True)
def db_upgrade(database_url: str | None, revision: str) -> None:
    """Apply the migrations (from an empty database too) and create the first token if there is none."""
    settings = _settings(database_url=database_url)
    from alembic.util.exc import CommandError

    from server.runtime.bootstrap import initialise
    from server.store.migrate import current, upgrade

    try:
        with _database_errors("migration failed"):
            if revision == "head":
                written = initialise(settings)
                if written is not None:
                    click.echo(f"created the first API token (admin); saved in {written}", err=True)
            else:
                upgrade(settings.database_url, revision)
    except CommandError as exc:  # e.g. an unknown revision
        fail(f"migration failed: {exc}")
    click.echo(f"database at revision {current(settings.database_url)}")


@click.group("token")
def token_group() -> None:
    """API tokens (works directly on the database)."""


def _sessions(database_url: str | None) -> Any:
    from server.store.db import make_engine, session_factory

    return session_factory(make_engine(_settings(database_url=database_url).database_url))


@token_group.command("create")
@click.argument("name")
@click.option("--scope", "scopes", multiple=True, type=click.Choice(["read", "write", "admin"]), required=True)
@click.option("--database-url", default=None)
def token_create(name: str, scopes: tuple[str, ...], database_url: str | None) -> None:
    """Create a token and print its secret (shown only once)."""
    from server.lifecycle.tokens import create_token

    with _database_errors("cannot create the token"), _sessions(database_url).begin() as session:
        new = create_token(session, name, list(scopes))  # type: ignore[arg-type]
        click.echo(json.dumps({"id": new.token.id, "name": name, "scopes": sorted(scopes), "token": new.secret}))


@token_group.command("list")
@click.option("--database-url", default=None)
def token_list(database_url: str | None) -> None:
    """List tokens (never their secrets)."""
    from sqlalchemy import select

    from server.store.models import ApiToken

    with _database_errors("cannot list tokens"), _sessions(database_url)() as session:
        for t in session.scalars(select(ApiToken).order_by(ApiToken.id)):
            state = "revoked" if t.revoked_at is not None else "active"
            click.echo(f"{t.id}\t{t.name}\t{t.scopes}\t{t.prefix}…\t{state}")


@token_group.command("revoke")
@click.argument("token_id", type=int)
@click.option("--database-url", default=None)
def token_revoke(token_id: int, database_url: str | None) -> None:
    """Revoke a token at once."""
    from server.lifecycle.tokens import revoke

    with _database_errors("cannot revoke the token"), _sessions(database_url).begin() as session:
        if revoke(session, token_id) is None:
            fail(f"token {token_id} does not exist")
    click.echo(f"revoked token {token_id}")


def register(cli: click.Group) -> None:
    for command in (server_cmd, db_group, token_group):
        cli.add_command(command)
