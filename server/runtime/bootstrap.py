"""First start of a server: migrate the database; for the embedded default (SQLite under ``home``) with no token
yet, also create an admin token and save it with the server URL in ``<home>/credentials.json`` (mode 600), where
the CLI finds it. Other databases get their tokens from ``scalerl token create``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from server.lifecycle.tokens import create_token, has_active_tokens
from server.store.db import make_engine, session_factory
from server.store.migrate import upgrade
from server.store.settings import Settings

FIRST_TOKEN_NAME = "first-token"


def server_url(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    return f"http://{host}:{settings.port}"


def write_credentials(path: Path, url: str, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"url": url, "token": token}, fh)
    path.chmod(0o600)


def initialise(settings: Settings) -> Path | None:
    """Migrate; create the first (admin) token if needed. Returns the credentials file if one was written."""
    upgrade(settings.database_url)
    if not settings.embedded:
        return None
    engine = make_engine(settings.database_url)
    try:
        with session_factory(engine).begin() as session:
            if has_active_tokens(session):
                return None
            secret = create_token(session, FIRST_TOKEN_NAME, ["admin"]).secret
            write_credentials(settings.credentials_path, server_url(settings), secret)
    finally:
        engine.dispose()
    return settings.credentials_path


def read_credentials(home: Path) -> dict[str, str]:
    """The saved URL and token, or ``{}`` when there is no credentials file."""
    path = home / "credentials.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {k: str(v) for k, v in data.items() if k in ("url", "token")}
