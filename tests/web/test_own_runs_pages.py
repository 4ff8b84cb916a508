"""In a browser: runs you train yourself, told apart by their config. The run page shows the config, tags
and notes; the experiment's column picker offers the config keys that differ, and the "ceiling or efficiency?" card
names the config key instead of "(same recipe)"."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import post_curve

pytestmark = pytest.mark.browser


def test_own_runs_show_and_compare_their_config(page: Any, live: LiveService) -> None:
    with live.client(live.write_token) as http:
        exp = http.post("/api/v1/experiments/tracking", json={"name": "own-configs", "compute_unit": "gpu_hours"})
        assert exp.status_code == 201, exp.text
        exp_id = exp.json()["id"]
        ids = []
        for lr, A in ((1e-6, 0.8), (3e-6, 0.6)):
            body: dict[str, Any] = {"name": f"own-lr-{lr:g}", "experiment_id": exp_id, "budget": 8000.0,
                                    "config": {"lr": lr, "loss": "cispo"}, "tags": ["lr-sweep"]}  # fmt: skip
            if lr == 1e-6:
                body["notes"] = "batch 64"
            made = http.post("/api/v1/runs", json=body)
            assert made.status_code == 201, made.text
            ids.append(made.json()["id"])
            post_curve(http, ids[-1], A, seed=len(ids))
            http.patch(f"/api/v1/runs/{ids[-1]}", json={"summary": {"best": A}})
            http.post(f"/api/v1/runs/{ids[-1]}/status", json={"status": "succeeded", "reason": "done"})
    assert live.ctx.drain(120)
    page.goto(f"{live.url}/runs/{ids[0]}")
    page.locator('[data-config="lr"]').wait_for()
    assert page.locator('[data-config="lr"]').inner_text() == "config.lr = 0.000001"
    assert page.locator('[data-tag="lr-sweep"]').inner_text() == "#lr-sweep"
    assert page.locator("#run-notes").inner_text() == "batch 64"
    assert page.locator('[data-summary="best"]').inner_text() == "summary.best = 0.8"
    page.goto(f"{live.url}/experiments/{exp_id}")
    page.locator("#comparison tbody tr").first.wait_for()
    rows = page.locator("#comparison tbody").inner_text()
    assert "config.lr = 0.000003" in rows and "(same recipe" not in rows, rows
    assert page.locator('#col-options input[value="config.lr"]').count() == 1
    assert page.locator('#col-options input[value="summary.best"]').count() == 1
    assert page.locator('#col-options input[value="config.loss"]').count() == 0  # the same in both runs
    screenshot(page, "own-runs-config")
