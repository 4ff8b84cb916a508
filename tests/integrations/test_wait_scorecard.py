"""`scalerl wait` on a finished grid ends with the scorecard's line (what the stops saved, when the verdict was
decided); the verdict it gates on carries the scorecard (``with_scorecard``), so ``--json`` prints it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from scalerl.cli.exit_codes import EXIT_OK
from scalerl.cli.main import cli
from scalerl.cli.waiting import Patient, scorecard_line, with_scorecard
from scalerl.client.api import Client
from tests.client.conftest import Service, wait_for
from tests.server.helpers import curve_points, sweep_doc


def test_wait_prints_the_scorecard_line_once_the_grid_finished(service: Service, tmp_path: Path) -> None:
    with service.http() as http:
        exp = http.post("/api/v1/experiments", json=sweep_doc(name="wait-scorecard")).json()
        for run, a in zip(exp["runs"], (0.8, 0.35), strict=True):
            assert http.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": curve_points(A=a, n=30)}).is_success
            assert http.post(f"/api/v1/runs/{run['id']}/status", json={"status": "succeeded", "reason": "b"}).is_success

        def settled() -> bool:
            a = http.get(f"/api/v1/experiments/{exp['id']}/assessment").json()
            return bool(a["version"] >= 1 and not a["pending"] and a["verdict"]["finished"])

        assert wait_for(settled, 60)
        card: dict[str, Any] = http.get(f"/api/v1/experiments/{exp['id']}/scorecard").json()
    env = {"SCALERL_HOME": str(tmp_path), "SCALERL_URL": "", "SCALERL_TOKEN": ""}
    args = ["wait", str(exp["id"]), "--url", service.url, "--token", service.token, "--poll", "0.2"]
    r = CliRunner().invoke(cli, args, env=env)
    assert r.exit_code == EXIT_OK, r.output
    assert f"scorecard: {card['summary']}" in r.stdout.splitlines()
    assert card["summary"].startswith("stops saved 0 of 16,000 gpu_hours (0%); decided at ")
    as_json = CliRunner().invoke(cli, [*args, "--json"], env=env)
    assert as_json.exit_code == EXIT_OK, as_json.output
    assert json.loads(as_json.stdout)["scorecard"] == card

    with Client(service.url, service.token) as client:
        verdict = client.verdict(exp["id"])
        out = with_scorecard(Patient(5.0, lambda _: None), client, exp["id"], verdict)
    assert out["scorecard"] == card and {k: out[k] for k in verdict} == verdict
    assert scorecard_line(out) == f"scorecard: {card['summary']}"
    assert scorecard_line({**out, "finished": False}) is None  # only once every run finished
    assert scorecard_line({**verdict, "finished": True, "scorecard": None}) is None  # a server without one
