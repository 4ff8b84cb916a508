"""The resume table of docs/integrations.md, cell by cell: each policy started against a finished, crashed, running
and unknown run named ``x``, by a real reporter against a live service. The table is read from the docs, so the
docs say what this test checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from scalerl.client import ApiError, Client, Point, Reporter
from server.store.models import Run, utcnow
from tests.client.conftest import Service, build_context, write_token
from tests.server.live import live_server

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
STATES = ("finished", "crashed", "running", "unknown")


def _table() -> dict[tuple[str, str], str]:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith('| `"')]
    header = next(line for line in DOC.read_text().splitlines() if line.startswith("| `resume` | finished"))
    columns = [c.strip().split(" ")[0] for c in header.strip("|").split("|")[1:]]
    assert tuple(columns) == STATES, columns
    cells: dict[tuple[str, str], str] = {}
    for row in rows:
        parts = [c.strip() for c in row.strip("|").split("|")]
        policy = re.match(r'`"(\w+)"`', parts[0])
        assert policy is not None, row
        for state, cell in zip(STATES, parts[1:], strict=True):
            cells[(policy.group(1), state)] = cell
    assert len(cells) == 16, cells
    return cells


TABLE = _table()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One live service for the sixteen cells (each uses an experiment of its own)."""
    home = tmp_path_factory.mktemp("resume-table")
    ctx = build_context(home)
    token = write_token(ctx)
    with live_server(ctx) as url:
        yield Service(url, token, ctx)
    ctx.engine.dispose()


def _prepare(service: Service, experiment: str, state: str) -> int | None:
    """The run ``x`` of ``experiment`` in ``state``; its id (None: there is none)."""
    if state == "unknown":
        with Client(service.url, service.token) as api:
            api.ensure_experiment(experiment)
        return None
    with Client(service.url, service.token) as api:
        info = api.register_run("x", experiment=experiment, heartbeat_seconds=10.0)
        api.post_points(info.id, [Point(1, 1.0, 0.1)])
        if state == "finished":
            api.report_status(info.id, "succeeded", "done")
    if state == "crashed":
        with service.ctx.sessions.begin() as session:  # its trainer last heard from a minute ago
            then = utcnow() - timedelta(seconds=60)
            session.execute(update(Run).where(Run.id == info.id).values(last_seen_at=then))
    return info.id


@pytest.mark.parametrize(("policy", "state"), sorted(TABLE))
def test_the_resume_table(service: Service, tmp_path: Path, policy: str, state: str) -> None:
    cell = TABLE[(policy, state)]
    experiment = f"table-{policy}-{state}"
    existing = _prepare(service, experiment, state)
    opts: dict[str, Any] = {"url": service.url, "token": service.token, "experiment": experiment,
                            "offline_dir": tmp_path / "offline", "handle_signals": False}  # fmt: skip
    error = re.match(r"error (\d+)", cell)
    if error:
        with pytest.raises(ApiError) as refused:
            Reporter.start("x", resume=policy, **opts)  # type: ignore[arg-type]
        assert refused.value.status_code == int(error.group(1)), cell
        return
    rep = Reporter.start("x", resume=policy, **opts)  # type: ignore[arg-type]
    try:
        if cell.startswith("new run"):
            expected = re.search(r"`([^`]+)`", cell)
            assert expected is not None
            assert rep.name == expected.group(1) and rep.run_id != existing, (cell, rep.name)
        else:
            assert cell.startswith("continues `x`"), cell
            assert rep.run_id == existing and rep.name == "x", (cell, rep.name)
            if "reopened" in cell:
                assert rep.status == "queued", (cell, rep.status)
    finally:
        rep.close(timeout=1.0)
        rep.client.close()
