"""Run comparison's read model: one metric of chosen runs against step or compute, with seed groups."""

from __future__ import annotations

from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc


def test_a_metric_of_chosen_runs_against_step_or_compute(service: Service) -> None:
    doc = sweep_doc(seeds=[0, 1])
    exp = service.client.post("/api/v1/experiments", json=doc, headers=service.write).json()
    runs = exp["runs"]
    assert len(runs) == 4
    for i, run in enumerate(runs):
        r = service.client.post(
            f"/api/v1/runs/{run['id']}/metrics",
            json={"points": curve_points(0.5 + 0.02 * i, n=20)},
            headers=service.write,
        )
        assert r.status_code == 200
    base = f"/api/v1/dashboard/experiments/{exp['id']}/metrics"
    out = service.client.get(
        base, params={"metric": "loss", "run": [runs[0]["id"], runs[1]["id"]]}, headers=service.read
    )
    assert out.status_code == 200, out.text
    body = out.json()
    assert body["metrics"] == ["pass_rate", "loss"] and body["x"] == "step"
    first = body["runs"][0]
    assert first["x"][:2] == [10.0, 20.0] and first["y"][0] == 1.0 and len(first["x"]) == 20
    by_compute = service.client.get(base, params={"x": "compute"}, headers=service.read).json()
    assert len(by_compute["runs"]) == 4 and by_compute["runs"][0]["x"][-1] == 8000.0
    labels = [r["group_label"] for r in by_compute["runs"]]
    assert labels == ["batch.prompts=32", "batch.prompts=32", "batch.prompts=48", "batch.prompts=48"]
    seeds_of = {}
    for r in by_compute["runs"]:
        seeds_of.setdefault(r["group"], []).append(r["seed"])
    assert sorted(len(v) for v in seeds_of.values()) == [2, 2], "two seeds of each recipe share a group"
    bad = service.client.get(base, params={"run": [999999]}, headers=service.read)
    assert bad.status_code == 422 and "not runs of experiment" in bad.json()["detail"]
    assert service.client.get(base, params={"x": "wall"}, headers=service.read).status_code == 422
