"""A real scalerl server process on 127.0.0.1 for the benches that load it (``load.py``, ``grid_create.py``,
``chart_per_batch.py``).

It runs in a temporary home (SQLite there unless a database URL is given), with an admin token (it implies write and
read) made at start, and is stopped when the context ends. Nothing but 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from rl_core.engine.ports import free_port

_SERVER = r"""
import json, sys
# The checkout under test (PYTHONPATH), not the editable install of another one.
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
import uvicorn
try:  # the composition root (server + pages); older checkouts built the whole app in server.app
    from scalerl.app import create_app
except ImportError:
    from server.app import create_app
try:  # server/ in layered rooms
    from server.runtime.context import ServiceContext
    from server.store.migrate import upgrade
    from server.store.settings import Settings
    from server.lifecycle.tokens import create_token
except ImportError:  # the flat server/ before it
    from server.context import ServiceContext
    from server.migrate import upgrade
    from server.settings import Settings
    from server.tokens import create_token
extra = {k: v for k, v in json.loads(sys.argv[4]).items() if k in Settings.model_fields}  # older checkouts lack some
settings = Settings(home=sys.argv[1], database_url=sys.argv[2], port=int(sys.argv[3]), **extra)
upgrade(settings.database_url)
ctx = ServiceContext.build(settings)
with ctx.sessions.begin() as s:
    print(json.dumps({"token": create_token(s, "bench", ["admin"]).secret}), flush=True)
try:  # the service's own uvicorn options (head deadline, keep-alive, JSON 414/431)
    from server.app import serve_options
    options = serve_options(settings)
except ImportError:  # older checkouts: their HTTP protocol, or uvicorn's own
    try:
        from server.http.http11 import LimitedH11Protocol as http
    except ImportError:
        try:
            from server.http11 import LimitedH11Protocol as http
        except ImportError:
            http = "auto"
    options = {"http": http}
uvicorn.run(create_app(ctx=ctx), host="127.0.0.1", port=settings.port, log_level="warning", **options)
"""


REPO = Path(__file__).resolve().parents[1]


def wait_healthy(base: str, seconds: float = 30.0) -> bool:
    """Poll ``base``'s ``/healthz`` every 0.1 s until it answers 200 (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.1)
    return False


@contextmanager
def bench_server(
    database: str = "",
    prefix: str = "scalerl-bench-",
    root: Path = REPO,
    home: Path | None = None,
    info: dict[str, Any] | None = None,
    **settings: Any,
) -> Iterator[tuple[str, str]]:
    """Start the server from the checkout ``root`` (another one, e.g. a ``git worktree`` of an older commit, to
    compare) in ``home`` (default: a new temporary folder); extra ``settings`` go to
    :class:`server.store.settings.Settings`. Yields (base URL, token); ``info`` gets the server's ``pid``."""
    home = home or Path(tempfile.mkdtemp(prefix=prefix))
    url_db = database or f"sqlite:///{home / 'scalerl.db'}"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(root)}
    argv = [sys.executable, "-c", _SERVER, str(home), url_db, str(port), json.dumps(settings)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True, cwd=root)
    if info is not None:
        info["pid"] = proc.pid
    try:
        assert proc.stdout is not None
        token = str(json.loads(proc.stdout.readline())["token"])
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
