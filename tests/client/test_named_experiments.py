"""Experiments for your own runs, by name (W&B's project/group): created from the API and the client
with a compute unit, a default budget and free-text task/model labels, no grid document and no placeholder run;
runs join them by name and inherit the labels; bad input is a clear 4xx."""

from __future__ import annotations

import pytest

from scalerl.client import ApiError, Client, Reporter
from tests.client.conftest import Service


def test_api_creates_an_experiment_by_name_without_runs(service: Service) -> None:
    with service.http() as http:
        body = {"name": "grpo-sweep", "compute_unit": "tokens", "budget": 5e6, "task": "gsm8k", "model": "qwen 0.5b"}
        created = http.post("/api/v1/experiments/tracking", json=body)
        assert created.status_code == 201, created.text
        exp = created.json()
        assert exp["n_runs"] == 0 and exp["status_counts"] == {}
        assert exp["document"]["compute_unit"] == "tokens" and exp["document"]["kind"] == "tracking"
        assert (exp["document"]["task"], exp["document"]["model"], exp["document"]["budget"]) == (
            "gsm8k",
            "qwen 0.5b",
            5e6,
        )
        again = http.post("/api/v1/experiments/tracking", json=body)
        assert again.status_code == 409 and "already exists" in again.json()["detail"]
        same = http.post("/api/v1/experiments/tracking", json={**body, "exist_ok": True})
        assert same.status_code == 200 and same.json()["id"] == exp["id"]
        other_unit = http.post("/api/v1/experiments/tracking", json={**body, "exist_ok": True, "compute_unit": "flops"})
        assert other_unit.status_code == 409 and "'tokens'" in other_unit.json()["detail"]
        for bad in (
            {"name": ""},
            {"name": "x", "budget": -1},
            {"name": "x", "budget": "10"},
            {"name": "x", "unknown": 1},
            {"name": "default"},
            {"name": "x", "compute_unit": ""},
        ):
            answer = http.post("/api/v1/experiments/tracking", json=bad)
            assert answer.status_code in (409, 422), (bad, answer.status_code)
            assert "detail" in answer.json()
        # the dashboard page of such an experiment renders
        page = http.get(f"/experiments/{exp['id']}")
        assert page.status_code == 200


def test_runs_join_by_name_and_inherit_labels(service: Service) -> None:
    with Client(service.url, service.token) as api:
        run = api.register_run("lr-1e-6", experiment="my-project", compute_unit="gpu_hours")
        exp = api.find_experiment("my-project")
        assert exp is not None and run.experiment_id == exp["id"] and exp["n_runs"] == 1
        assert api.register_run("lr-1e-6", experiment="my-project").id == run.id  # a restarted trainer attaches
        api.ensure_experiment("labelled", budget=12.0, task="math", model="llama")
        labelled = api.register_run("r1", experiment="labelled")
        detail = api.get_run(labelled.id)
        assert (detail["budget"], detail["task"], detail["model"]) == (12.0, "math", "llama")
        with pytest.raises(ApiError) as mismatch:
            api.register_run("r2", experiment="labelled", compute_unit="tokens")
        assert mismatch.value.status_code == 409
        found = api.find_run_by_name("r1", "labelled")
        assert found is not None and found.id == labelled.id
        assert api.find_run_by_name("nope", "labelled") is None


def test_reporter_joins_an_experiment_by_name(service: Service) -> None:
    rep = Reporter.start("reported", url=service.url, token=service.token, experiment="reporter-project", budget=3.0)
    assert rep.wait_for_run(15.0) is not None
    rep.log(1, 0.1, 0.2)
    assert rep.finish()
    with Client(service.url, service.token) as api:
        exp = api.find_experiment("reporter-project")
        assert exp is not None and exp["n_runs"] == 1 and exp["status_counts"] == {"succeeded": 1}
