"""The REST client of commands that talk to the service, and how they report a refused request: one place for
the token check and the 4xx messages (exit codes: scalerl/cli/exit_codes.py)."""

from __future__ import annotations

from typing import NoReturn

from scalerl.cli.errors import fail
from scalerl.cli.exit_codes import EXIT_AUTH
from scalerl.client.api import ApiError, Client, _detail_text


def connect(url: str | None, token: str | None) -> Client:
    """A client for the service (the arguments, else the environment, else the saved credentials); no token
    exits 6."""
    client = Client(url, token, timeout=60.0)
    if client.token is None:
        fail("no API token: pass --token, set SCALERL_TOKEN, or start the server once to create one", EXIT_AUTH)
    return client


def refused(exc: ApiError, client: Client, context: str = "") -> NoReturn:
    """A 4xx: 401/403 exit 6 (auth), anything else 2 (bad input), the message prefixed by ``context``."""
    if exc.status_code in (401, 403):
        fail(f"the server at {client.url} refused the token ({exc.status_code}: {_detail_text(exc.detail)})", EXIT_AUTH)
    fail(f"{context}server answered {exc.status_code}: {_detail_text(exc.detail)}")
