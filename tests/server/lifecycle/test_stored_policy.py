"""A policy stored with the optional rules' old flat names (every experiment created before the rules were blocks)
still loads, decides and is assessed as the same policy as its nested form; the REST edge reads the flat names,
writes blocks, and refuses a document that gives a rule both ways."""

from __future__ import annotations

from typing import Any

from server.assess.gather import current_state
from server.assess.runread import experiment_runs
from server.lifecycle.grid import parse_policy
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Experiment
from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc

NESTED = {"mode": "auto_stop", "rung": None, "resume": {"gain": 0.03, "max_resumes": 1}, "fall": {"z": 3.0}}
#: The same policy as a server before the blocks stored it: the grid document's dump, every key flat.
FLAT = {
    "mode": "auto_stop", "min_gain": 0.01, "p_stop": 0.9, "min_expected_gain": 0.004, "hold": 2, "seed_z": 2.5,
    "behind_z": 2.5, "behind_margin": 0.02, "behind_points": 2, "rung_eta": None, "rung_margin": 0.01,
    "p_resume": 0.5, "resume_gain": 0.03, "max_resumes": 1, "fall_z": 3.0, "fall_margin": 0.02, "guards": [],
}  # fmt: skip


def _spec(service: Service, exp_id: int) -> tuple[ExperimentSpec, str]:
    with service.ctx.sessions.begin() as session:
        experiment = session.get(Experiment, exp_id)
        assert experiment is not None
        spec = ExperimentSpec.of(experiment)
        return spec, current_state(spec, experiment_runs(session, experiment))


def _store_policy(service: Service, exp_id: int, policy: dict[str, Any]) -> None:
    with service.ctx.sessions.begin() as session:
        experiment = session.get(Experiment, exp_id)
        assert experiment is not None
        experiment.document = {**experiment.document, "policy": policy}


def test_a_stored_flat_policy_loads_as_its_nested_form(service: Service) -> None:
    r = service.client.post("/api/v1/experiments", json=sweep_doc(policy=NESTED), headers=service.write)
    assert r.status_code == 201, r.text
    exp = r.json()
    stored = exp["document"]["policy"]
    assert stored["rung"] is None and stored["resume"]["gain"] == 0.03 and "rung_eta" not in stored  # written nested
    run_id = exp["runs"][0]["id"]
    body = {"points": curve_points(A=0.6, n=12, c_max=3000.0)}
    assert service.client.post(f"/api/v1/runs/{run_id}/metrics", json=body, headers=service.write).is_success
    nested_spec, nested_state = _spec(service, exp["id"])
    assert nested_spec.policy == parse_policy(NESTED)

    _store_policy(service, exp["id"], FLAT)  # as an experiment created before the blocks holds it
    flat_spec, flat_state = _spec(service, exp["id"])
    assert flat_spec.policy == nested_spec.policy and flat_spec.policy_key == nested_spec.policy_key
    assert flat_state == nested_state  # the same policy: a stored assessment stays current
    read = service.client.get(f"/api/v1/experiments/{exp['id']}", headers=service.read)
    assert read.status_code == 200 and read.json()["policy"] == "auto_stop"
    service.drain()
    recs = service.client.get(f"/api/v1/experiments/{exp['id']}/recommendations", headers=service.read)
    assert recs.status_code == 200, recs.text

    put = service.client.put(f"/api/v1/experiments/{exp['id']}/policy", json=FLAT, headers=service.write)
    assert put.status_code == 200, put.text
    assert put.json()["document"]["policy"] == {"mode": "auto_stop", **{k: v for k, v in NESTED.items() if k != "mode"}}
    assert _spec(service, exp["id"])[0].policy_key == nested_spec.policy_key


def test_a_rule_given_as_a_block_and_by_its_flat_names_is_a_422(service: Service) -> None:
    mixed = sweep_doc(name="mixed", policy={"rung": {"eta": 3.0}, "rung_margin": 0.02})
    r = service.client.post("/api/v1/experiments?dry_run=true", json=mixed, headers=service.write)
    assert r.status_code == 422 and "`rung`" in r.text and "`rung_margin`" in r.text and "both given" in r.text
    r = service.client.post("/api/v1/experiments?dry_run=true", json=sweep_doc(policy=FLAT), headers=service.write)
    assert r.status_code == 200, r.text
    off = sweep_doc(policy={"behind": {"z": None}})
    r = service.client.post("/api/v1/experiments?dry_run=true", json=off, headers=service.write)
    assert r.status_code == 422 and "behind: null" in r.text
