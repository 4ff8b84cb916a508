"""What a 256-run grid whose recipe holds a 16,000-character string (the string cap) stores and answers (a
1 MB recipe string with 256 runs stored 517 MB when every run held the full recipe). SQLite, in-process.

    .venv/bin/python bench/recipe_storage.py
    PYTHONPATH=/tmp/before .venv/bin/python bench/recipe_storage.py before     # an older checkout's server
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

from fastapi.testclient import TestClient

from server.lifecycle.tokens import create_token
from server.runtime.context import ServiceContext
from server.store.migrate import upgrade
from server.store.settings import Settings

try:
    from scalerl.app import create_app
except ImportError:  # older checkouts built the whole app in server.app
    from server.app import create_app  # type: ignore[no-redef]


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "this checkout"
    home = Path(tempfile.mkdtemp(prefix="scalerl-recipes-"))
    url = f"sqlite:///{home / 's.db'}"
    upgrade(url)
    settings = Settings(home=home, database_url=url, fit_workers=0, interval_refit=False, allowed_hosts=("testserver",))
    ctx = ServiceContext.build(settings)
    with ctx.sessions.begin() as s:
        h = {"Authorization": f"Bearer {create_token(s, 't', ['write']).secret}"}
    doc = {
        "name": "once",
        "preset": "scalerl",
        "task": "gsm8k",
        "model": "tiny",
        "budget": 8000.0,
        "seeds": [0],
        "recipe": {"length": {"interruption": {"phrase": "y" * 16000}}},
        "grid": {"batch.prompts": list(range(8, 264))},
        "max_runs": 256,
    }
    with TestClient(create_app(ctx=ctx)) as c:
        before = os.path.getsize(home / "s.db")
        r = c.post("/api/v1/experiments?runs_limit=4096", json=doc, headers=h)
        assert r.status_code == 201, r.text[:300]
        read = c.get(f"/api/v1/experiments/{r.json()['id']}", headers=h)
        ctx.engine.dispose()
        con = sqlite3.connect(home / "s.db")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        grown = os.path.getsize(home / "s.db") - before
    print(
        f"{label}: request {len(json.dumps(doc)) / 1e3:.0f} KB, database grew {grown / 1e6:.2f} MB, creation answer "
        f"(all 256 runs) {len(r.content) / 1e6:.2f} MB, GET experiment {len(read.content) / 1e6:.2f} MB "
        f"({len(read.json()['runs'])} runs)"
    )


if __name__ == "__main__":
    main()
