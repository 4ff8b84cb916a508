"""``fit: {prior: team}`` (the default): at submission, the service learns the shape prior from its own succeeded
runs of the same task and model, stores it in the experiment's document, and fits the experiment with it; with too
little history it falls back to flat priors and says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rl_core.scaling.fit.prior import load_prior
from rl_core.scaling.measure.corpus import load_curves
from rl_core.scaling.measure.prior_build import PriorCorpus
from server.lifecycle.team_prior import MIN_TEAM_RUNS
from tests.server.conftest import Service
from tests.server.helpers import sweep_doc

STUDY = Path(__file__).resolve().parents[2] / "fixtures" / "public_grids" / "grpo_math1p5b"


def _study_runs(n: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """The first ``n`` runs of the public GRPO study as metric points, the step standing in for compute."""
    curves, _ = load_curves(STUDY)
    out = []
    for c in curves[:n]:
        points = [
            {"step": int(s), "compute": float(x), "pass_rate": float(y)}
            for s, x, y in zip(c.steps, c.x, c.y, strict=True)
        ]
        out.append((c.name, points))
    return out


def _past_grid(service: Service, name: str, model: str, runs: list[tuple[str, list[dict[str, Any]]]]) -> int:
    """An experiment whose runs report the given curves and then succeed (8 cells: 2 batch sizes x 4 seeds)."""
    doc = sweep_doc(name=name, model=model, seeds=[0, 1, 2, 3], fit={"prior": "public"})
    exp = service.client.post("/api/v1/experiments", json=doc, headers=service.write)
    assert exp.status_code == 201, exp.text
    assert len(exp.json()["runs"]) == len(runs)
    for run, (_, points) in zip(exp.json()["runs"], runs, strict=True):
        r = service.client.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": points}, headers=service.write)
        assert r.status_code == 200, r.text
        r = service.client.post(
            f"/api/v1/runs/{run['id']}/status", json={"status": "succeeded", "reason": "budget"}, headers=service.write
        )
        assert r.status_code == 200, r.text
    return int(exp.json()["id"])


def _document(service: Service, exp_id: int) -> dict[str, Any]:
    exp = service.client.get(f"/api/v1/experiments/{exp_id}", headers=service.read).json()
    doc: dict[str, Any] = exp["document"]
    return doc


def test_a_team_prior_is_learned_from_the_same_stacks_finished_runs(service: Service) -> None:
    runs = _study_runs(MIN_TEAM_RUNS)
    past = _past_grid(service, "past", "qwen-math", runs)
    # a stopped run is a partial curve: it must not be learned from
    extra = service.client.post(
        "/api/v1/runs", json={"name": "stopped-early", "experiment_id": past}, headers=service.write
    ).json()
    service.client.post(f"/api/v1/runs/{extra['id']}/metrics", json={"points": runs[0][1]}, headers=service.write)
    service.client.post(
        f"/api/v1/runs/{extra['id']}/status", json={"status": "stopped", "reason": "test"}, headers=service.write
    )

    preview = service.client.post(
        "/api/v1/experiments?dry_run=true", json=sweep_doc(name="next", model="qwen-math"), headers=service.write
    )
    assert preview.status_code == 200, preview.text
    assert f"learned at submission from {MIN_TEAM_RUNS} succeeded runs" in preview.json()["fit_prior"]

    created = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name="next", model="qwen-math"), headers=service.write
    )
    assert created.status_code == 201, created.text
    fit = _document(service, created.json()["id"])["fit"]
    prior = fit["team_prior"]
    assert fit["prior"] == "team" and isinstance(prior, dict) and prior["version"].startswith("team "), fit
    assert prior["sources"] == ["past"] and prior["extra"]["model"] == "qwen-math"
    assert f"from {MIN_TEAM_RUNS} succeeded runs" in fit["prior_note"] and "past" in fit["prior_note"]

    # the same prior that the library learns from those curves as files of one grid
    curves, _ = load_curves(STUDY)
    by_name = {c.name: c for c in curves}
    from dataclasses import replace

    expected = PriorCorpus([replace(by_name[name], name=f"past/{i}") for i, (name, _) in enumerate(runs)]).prior(
        version="t"
    )
    np.testing.assert_allclose(prior["mean"], expected.mean, rtol=1e-9)
    np.testing.assert_allclose(prior["cov"], expected.cov, rtol=1e-9)
    assert prior["mean"] != pytest.approx(list(load_prior().mean), abs=0.05)  # not the shipped prior

    # and the experiment's fits use it: the stored forecast names the team prior
    run_id = created.json()["runs"][0]["id"]
    service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": runs[1][1][:20]}, headers=service.write)
    service.drain()
    forecast = service.client.get(f"/api/v1/runs/{run_id}", headers=service.read).json()["forecast"]
    assert forecast is not None and forecast["fit"]["prior"].startswith("team "), forecast


def test_too_little_history_falls_back_to_flat_priors_and_says_why(service: Service) -> None:
    _past_grid(service, "past-small", "qwen-math", _study_runs(MIN_TEAM_RUNS))
    # another model: the history of qwen-math does not count
    other = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name="other-model", model="llama"), headers=service.write
    )
    assert other.status_code == 201, other.text
    fit = _document(service, other.json()["id"])["fit"]
    assert fit["prior"] == "team" and fit["team_prior"] is None
    assert fit["prior_note"].startswith("team prior: 0 succeeded run(s) of task 'gsm8k' with model 'llama'"), fit
    assert f"{MIN_TEAM_RUNS} needed; flat priors are used" in fit["prior_note"]
    # a prior named in the document is used as given, whatever the history
    given = service.client.post(
        "/api/v1/experiments",
        json=sweep_doc(name="given", model="qwen-math", fit={"prior": "none"}),
        headers=service.write,
    )
    fit = _document(service, given.json()["id"])["fit"]
    assert fit["prior"] == "none" and fit["team_prior"] is None and fit["prior_note"] == ""
    # a cloned document learns afresh: what it gives for the service's fields is replaced
    stale = {"prior": "team", "team_prior": {"mean": [0, 0], "cov": [[1, 0], [0, 1]]}, "prior_note": "stale"}
    clone = service.client.post(
        "/api/v1/experiments", json=sweep_doc(name="clone", model="llama", fit=stale), headers=service.write
    )
    assert clone.status_code == 201, clone.text
    fit = _document(service, clone.json()["id"])["fit"]
    assert fit["team_prior"] is None and fit["prior_note"].startswith("team prior: 0 succeeded"), fit


def test_the_note_always_fits_the_document() -> None:
    """The longest task, model and experiment names still give a note the stored document accepts."""
    from server.lifecycle.grid import FitSpec
    from server.lifecycle.team_prior import _clip

    long_note = _clip("team prior: " + "x" * 5000)
    assert len(long_note) <= 1000 and long_note.endswith("…")
    assert FitSpec.model_validate({"prior_note": long_note}).prior_note == long_note
    assert _clip("short") == "short"
