"""``scalerl server``, ``scalerl db``, ``scalerl token`` and ``scalerl submit``: running and using the service."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from scalerl.cli.errors import fail

EXIT_CONDITION = 1
EXIT_TIMEOUT = 3


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

    from server.settings import Settings

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        fail("invalid settings: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))


@click.command("server")
@click.option("--host", default=None, help="Bind address (default 127.0.0.1, or SCALERL_HOST).")
@click.option("--port", type=int, default=None, help="Port (default 8765, or SCALERL_PORT).")
@click.option("--database-url", default=None, help="SQLAlchemy URL (default: SQLite under SCALERL_HOME).")
@click.option("--open-reads", is_flag=True, default=None, help="Serve GET endpoints without a token (loopback only).")
def server_cmd(host: str | None, port: int | None, database_url: str | None, open_reads: bool | None) -> None:
    """Run the REST service (migrates the database first; creates a first admin token if none exists)."""
    settings = _settings(host=host, port=port, database_url=database_url, open_reads=open_reads)
    import uvicorn

    from scalerl.app import create_app
    from server.bootstrap import initialise

    with _database_errors("cannot prepare the database"):
        written = initialise(settings)
    if written is not None:
        click.echo(f"created the first API token (admin); saved with the URL in {written}", err=True)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, timeout_graceful_shutdown=3)


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

    from server.bootstrap import initialise
    from server.migrate import current, upgrade

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
    from server.db import make_engine, session_factory

    return session_factory(make_engine(_settings(database_url=database_url).database_url))


@token_group.command("create")
@click.argument("name")
@click.option("--scope", "scopes", multiple=True, type=click.Choice(["read", "write", "admin"]), required=True)
@click.option("--database-url", default=None)
def token_create(name: str, scopes: tuple[str, ...], database_url: str | None) -> None:
    """Create a token and print its secret (shown only once)."""
    from server.tokens import create_token

    with _database_errors("cannot create the token"), _sessions(database_url).begin() as session:
        new = create_token(session, name, list(scopes))  # type: ignore[arg-type]
        click.echo(json.dumps({"id": new.token.id, "name": name, "scopes": sorted(scopes), "token": new.secret}))


@token_group.command("list")
@click.option("--database-url", default=None)
def token_list(database_url: str | None) -> None:
    """List tokens (never their secrets)."""
    from sqlalchemy import select

    from server.models import ApiToken

    with _database_errors("cannot list tokens"), _sessions(database_url)() as session:
        for t in session.scalars(select(ApiToken).order_by(ApiToken.id)):
            state = "revoked" if t.revoked_at is not None else "active"
            click.echo(f"{t.id}\t{t.name}\t{t.scopes}\t{t.prefix}…\t{state}")


@token_group.command("revoke")
@click.argument("token_id", type=int)
@click.option("--database-url", default=None)
def token_revoke(token_id: int, database_url: str | None) -> None:
    """Revoke a token at once."""
    from server.tokens import revoke

    with _database_errors("cannot revoke the token"), _sessions(database_url).begin() as session:
        if revoke(session, token_id) is None:
            fail(f"token {token_id} does not exist")
    click.echo(f"revoked token {token_id}")


def _client_config(url: str | None, token: str | None) -> tuple[str, str | None]:
    from server.bootstrap import read_credentials

    home = Path(os.environ.get("SCALERL_HOME") or Path.home() / ".scalerl")
    saved = read_credentials(home)
    return (
        (url or os.environ.get("SCALERL_URL") or saved.get("url") or "http://127.0.0.1:8765").rstrip("/"),
        token or os.environ.get("SCALERL_TOKEN") or saved.get("token"),
    )


def _request(client: Any, method: str, path: str, **kwargs: Any) -> Any:
    import httpx

    try:
        resp = client.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        fail(f"cannot reach the server at {client.base_url}: {exc}")
    if resp.status_code >= 400:
        try:
            detail = resp.json().get("detail")
        except ValueError:
            detail = resp.text
        if isinstance(detail, list):
            detail = "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
        fail(f"server answered {resp.status_code}: {detail}")
    return resp.json() if resp.content else None


@click.command("submit")
@click.argument("grid", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--url", default=None, help="Server URL (default: SCALERL_URL or the saved credentials).")
@click.option("--token", default=None, help="API token (default: SCALERL_TOKEN or the saved credentials).")
@click.option("--dry-run", is_flag=True, help="Validate and list the runs; store nothing.")
@click.option("--wait", is_flag=True, help="Wait until the verdict is decided or every run finished.")
@click.option("--timeout", type=float, default=86400.0, show_default=True, help="Seconds to wait at most.")
@click.option("--poll", type=float, default=10.0, show_default=True, help="Seconds between checks.")
@click.option("--fail-if", "fail_if", multiple=True, help="Exit 1 if this holds at the end (repeatable).")
def submit_cmd(
    grid: Path,
    url: str | None,
    token: str | None,
    dry_run: bool,
    wait: bool,
    timeout: float,
    poll: float,
    fail_if: tuple[str, ...],
) -> None:
    """Submit a grid document (YAML or JSON). Exit codes: 0 ok, 1 a --fail-if condition holds, 2 bad input or
    rejected by the server, 3 timed out waiting.

    Conditions: undecided, unfinished, any-failed, best==NAME, best!=NAME, A<X.
    """
    from scalerl.cli.gate import ConditionError, parse_condition

    try:
        conditions = [parse_condition(c) for c in fail_if]
    except ConditionError as exc:
        fail(str(exc))
    if (conditions and not wait) or timeout <= 0 or poll <= 0:
        fail("--fail-if needs --wait; --timeout and --poll must be positive")
    if not grid.is_file():
        fail(f"grid document {grid} does not exist")
    body = grid.read_bytes()
    ctype = "application/json" if grid.suffix == ".json" else "application/yaml"
    base, secret = _client_config(url, token)
    if secret is None:
        fail("no API token: pass --token, set SCALERL_TOKEN, or start the server once to create one")
    import httpx

    headers = {"Authorization": f"Bearer {secret}", "Content-Type": ctype}
    with httpx.Client(base_url=base, headers=headers, timeout=60.0) as client:
        # Created: only the id and n_runs are read, so the answer carries no runs (a 4,096-run grid's were 7 MB).
        params = {"dry_run": "true"} if dry_run else {"runs_limit": "0"}
        created = _request(client, "POST", "/api/v1/experiments", content=body, params=params)
        if dry_run:
            for run in created["runs"]:
                click.echo(f"{run['name']}\tbudget={run['budget']:g}")
            click.echo(f"{created['n_runs']} runs, total budget {created['total_budget']:g}")
            return
        exp_id = created["id"]
        click.echo(f"experiment {exp_id} ({created['name']}): {created['n_runs']} runs queued")
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while True:
            verdict = _request(client, "GET", f"/api/v1/experiments/{exp_id}/verdict")
            if verdict["decided"] or verdict["finished"] or time.monotonic() >= deadline:
                break
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        runs = _request(client, "GET", "/api/v1/runs", params={"experiment_id": exp_id, "limit": 10_000})
    _report(verdict)
    statuses = [r["status"] for r in runs]
    failed = [c.text for c in conditions if c.holds(verdict, statuses)]
    if failed:
        click.echo(f"fail-if: {', '.join(failed)}", err=True)
        sys.exit(EXIT_CONDITION)
    if not (verdict["decided"] or verdict["finished"]):
        click.echo(f"timed out after {timeout:g} s without a decision", err=True)
        sys.exit(EXIT_TIMEOUT)


def _report(verdict: dict[str, Any]) -> None:
    state = "decided" if verdict["decided"] else "not decided"
    click.echo(f"verdict ({state}): best={verdict['best_run_name']} runner-up={verdict['runner_up_name']}")
    click.echo(f"  {verdict['reason']}")
    for r in verdict["ranking"]:
        a = "-" if r["A"] is None else f"{r['A']:.3f}"
        click.echo(f"  {r['run_name']}\tA={a}\t{r['fit_status']}")


def register(cli: click.Group) -> None:
    for command in (server_cmd, db_group, token_group, submit_cmd):
        cli.add_command(command)
