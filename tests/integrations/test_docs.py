"""docs/integrations.md: the plain-loop recipe runs as written against a live service."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.client.conftest import Service

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def test_plain_loop_recipe_runs_as_written(service: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCALERL_URL", service.url)
    monkeypatch.setenv("SCALERL_TOKEN", service.token)
    monkeypatch.setenv("SCALERL_HOME", str(tmp_path))
    section = DOC.read_text().split("## A plain loop", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    scope: dict[str, object] = {}
    exec(compile(code.group(1), str(DOC), "exec"), scope)
    rep = scope["rep"]
    assert rep.run_id is not None and rep.buffered == 0 and rep.status == "succeeded"  # type: ignore[attr-defined]
    with service.http() as http:
        points = http.get(f"/api/v1/runs/{rep.run_id}/metrics").json()  # type: ignore[attr-defined]
    assert len(points) == 40 and sum(p["pass_rate"] is not None for p in points) == 8
