"""Experiments from grid documents: YAML or JSON, validated (recipes included) before anything is stored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import Service
from tests.server.helpers import LOO_YAML, sweep_doc

YAML = {"Content-Type": "application/yaml"}


def test_leave_one_out_from_yaml(service: Service) -> None:
    r = service.client.post(
        "/api/v1/experiments?recipes=true", content=LOO_YAML.format(name="loo"), headers={**service.write, **YAML}
    )
    assert r.status_code == 201, r.text
    body = r.json()
    names = [run["name"] for run in body["runs"]]
    assert names[0] == "base,seed=0" and "loo-loss-dapo,seed=0" in names and len(names) == 7
    dapo = next(run for run in body["runs"] if run["name"] == "loo-loss-dapo,seed=0")
    assert dapo["overrides"] == {"loss.type": "dapo"} and dapo["recipe"]["loss"]["type"] == "dapo"
    assert all(run["status"] == "queued" and run["budget"] == 16000 for run in body["runs"])
    assert body["status_counts"] == {"queued": 7}


def test_dry_run_expands_and_stores_nothing(service: Service) -> None:
    doc = sweep_doc(seeds=[0, 1])
    r = service.client.post("/api/v1/experiments?dry_run=true", json=doc, headers=service.write)
    assert r.status_code == 200
    body = r.json()
    assert body["n_runs"] == 4 and body["total_budget"] == 32000.0
    assert [x["name"] for x in body["runs"]] == [
        "batch.prompts=32,seed=0",
        "batch.prompts=32,seed=1",
        "batch.prompts=48,seed=0",
        "batch.prompts=48,seed=1",
    ]
    assert service.client.get("/api/v1/experiments", headers=service.read).json() == []


def test_invalid_documents_are_rejected_with_every_problem(service: Service) -> None:
    c, h = service.client, service.write
    bad_key = sweep_doc(grid={"batch.prompt": [32]})
    r = c.post("/api/v1/experiments", json=bad_key, headers=h)
    assert r.status_code == 422
    assert "did you mean 'prompts'" in r.json()["detail"][0]
    r = c.post("/api/v1/experiments", json=sweep_doc(recipe={"loss": {"type": "nope"}}), headers=h)
    assert r.status_code == 422 and "cispo" in r.json()["detail"][0]
    r = c.post("/api/v1/experiments", json={**sweep_doc(), "budget": -1, "colour": "red"}, headers=h)
    assert r.status_code == 422
    assert any(p.startswith("budget") for p in r.json()["detail"]) and any("colour" in p for p in r.json()["detail"])
    r = c.post("/api/v1/experiments", json=sweep_doc(leave_one_out=True), headers=h)
    assert r.status_code == 422 and "not both" in r.json()["detail"][0]
    r = c.post("/api/v1/experiments", json=sweep_doc(max_runs=1), headers=h)
    assert r.status_code == 422 and "cap" in r.json()["detail"][0]
    r = c.post("/api/v1/experiments", content=b"name: [unclosed", headers={**h, **YAML})
    assert r.status_code == 422 and "YAML" in r.json()["detail"]
    r = c.post("/api/v1/experiments", content=b"[1, 2]", headers={**h, "Content-Type": "application/json"})
    assert r.status_code == 422 and "mapping" in r.json()["detail"][0]
    assert c.get("/api/v1/experiments", headers=service.read).json() == []
    assert c.get("/api/v1/runs", headers=service.read).json() == []


def test_duplicate_name_conflicts(service: Service) -> None:
    c = service.client
    assert c.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).status_code == 201
    r = c.post("/api/v1/experiments", json=sweep_doc(), headers=service.write)
    assert r.status_code == 409 and "already exists" in r.json()["detail"]
    assert len(c.get("/api/v1/runs", headers=service.read).json()) == 2


def test_read_experiment_and_404(service: Service) -> None:
    c = service.client
    exp = c.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    got = c.get(f"/api/v1/experiments/{exp['id']}", headers=service.read).json()
    assert got["document"]["grid"] == {"batch.prompts": [32, 48]} and got["n_runs"] == 2
    assert got["policy"] == "recommend"
    r = c.get("/api/v1/experiments/999", headers=service.read)
    assert r.status_code == 404 and "does not exist" in r.json()["detail"]


def test_register_run_directly(service: Service) -> None:
    c, h = service.client, service.write
    r = c.post("/api/v1/runs", json={"name": "trl-run", "budget": 100.0, "preset": "qwen-dapo"}, headers=h)
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["status"] == "queued" and run["recipe"]["loss"]["type"] == "dapo"
    exp = c.get(f"/api/v1/experiments/{run['experiment_id']}", headers=service.read).json()
    assert exp["name"] == "default"
    assert c.post("/api/v1/runs", json={"name": "trl-run"}, headers=h).status_code == 409
    r = c.post("/api/v1/runs", json={"name": "x", "recipe": {"loss": {"typo": 1}}}, headers=h)
    assert r.status_code == 422 and "typo" in r.json()["detail"][0]
    assert c.post("/api/v1/runs", json={"name": "y", "experiment_id": 12345}, headers=h).status_code == 404


def test_the_preview_warns_when_a_budget_buys_too_few_evaluations_to_fit(service: Service) -> None:
    """The form's defaults made runs with too few evaluations to fit, and nothing said so at preview.
    The estimate comes from earlier runs of the same task and model (here: 6 evaluations in 1,000 units)."""
    doc = {**sweep_doc(name="earlier"), "task": "t-eval", "model": "m-eval", "budget": 1000.0}
    exp = service.client.post("/api/v1/experiments", json=doc, headers=service.write).json()
    points = [{"step": 0, "compute": 0.0, "pass_rate": 0.2}] + [
        {"step": 10 * i, "compute": 1000.0 * i / 6, "pass_rate": 0.2 + 0.05 * i} for i in range(1, 7)
    ]
    posted = service.client.post(
        f"/api/v1/runs/{exp['runs'][0]['id']}/metrics", json={"points": points}, headers=service.write
    )
    assert posted.status_code == 200, posted.text

    def preview(**extra: object) -> dict[str, Any]:
        body = {**doc, "name": "next", **extra}
        r = service.client.post("/api/v1/experiments?dry_run=true", json=body, headers=service.write)
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    small = preview(budget=500.0)
    est = small["evaluations"]
    assert est["per_unit"] == pytest.approx(0.006) and est["from_runs"] == 1 and est["per_run"] == pytest.approx(3.0)
    assert est["after_burn_in"] == pytest.approx(2.4) and est["needed"] == 4
    assert est["budget_needed"] == pytest.approx(4 / 0.8 / 0.006)
    [warning] = small["warnings"]
    assert warning.startswith("budget: a run is expected to make about 3.0 evaluations") and "833" in warning
    assert preview(budget=2000.0)["warnings"] == []
    burn = preview(budget=1000.0, fit={"burn_in": 500.0})  # an absolute burn-in keeps only the rest
    assert burn["evaluations"]["after_burn_in"] == pytest.approx(3.0) and len(burn["warnings"]) == 1
    other = preview(task="another-task")
    assert other["evaluations"] is None and other["warnings"] == []
