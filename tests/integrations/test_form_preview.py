"""The new-experiment form's preview estimates a run's evaluations from the grid document itself
when the server has no earlier run of its task and model (it warned only with such history, so the form's defaults
gave runs of 2 evaluations, "insufficient data" for ever, with no hint why), and the form's defaults are a grid the
demo's base model learns and can forecast."""

from __future__ import annotations

from typing import Any

from tests.client.conftest import Service
from web.forms import form_context, form_defaults

OLD_DEFAULTS: dict[str, Any] = {
    "name": "old-defaults",
    "preset": "scalerl",
    "grid": {"batch.prompts": [32, 48]},
    "seeds": [0],
    "task": "synthetic-addition",
    "model": "tiny",
    "budget": 0.05,
    "compute_unit": "gpu_hours",
}


def preview(service: Service, doc: dict[str, Any]) -> dict[str, Any]:
    with service.http() as http:
        answer = http.post("/api/v1/experiments", params={"dry_run": "true"}, json=doc)
    assert answer.status_code == 200, answer.text
    out: dict[str, Any] = answer.json()
    return out


def test_the_old_defaults_are_warned_about_without_any_history(service: Service) -> None:
    out = preview(service, OLD_DEFAULTS)
    est = out["evaluations"]
    assert est is not None and est["from_runs"] == 0 and est["after_burn_in"] < est["needed"]
    assert "estimated from the document" in est["basis"]
    assert out["warnings"] and "estimated from the document" in out["warnings"][0]
    assert "insufficient data" in out["warnings"][0] and "raise the budget" in out["warnings"][0]


def test_the_form_defaults_buy_enough_evaluations(service: Service) -> None:
    d = form_defaults()
    key, values = d["axis"]
    doc = {
        "name": "form-defaults",
        "preset": "scalerl",
        "recipe": d["recipe"],
        "grid": {key: [float(v) for v in values.split(",")]},
        "seeds": [0],
        "task": d["task"],
        "model": d["model"],
        "budget": d["budget"],
        "compute_unit": "gpu_hours",
    }
    assert d["recipe"]["batch"] == {"prompts": 16, "generations": 8}  # the demo's CPU sizes
    out = preview(service, doc)
    est = out["evaluations"]
    assert out["n_runs"] == 2 and not out["warnings"], out["warnings"]
    assert est is not None and est["after_burn_in"] >= 2 * est["needed"], est
    assert form_context()["defaults"] == d


def test_other_models_get_no_made_up_estimate(service: Service) -> None:
    out = preview(service, {**OLD_DEFAULTS, "model": "qwen2-0.5b"})  # a model the reference was not measured on
    assert out["evaluations"] is None and not [w for w in out["warnings"] if w.startswith("budget:")]


def test_the_form_page_carries_the_defaults(service: Service) -> None:
    with service.http() as http:
        page = http.get("/experiments/new")
    assert page.status_code == 200
    assert 'id="form-defaults"' in page.text and 'id="f-demo-sizes"' in page.text
    assert "{preset: tiny}" in page.text
