"""The experiment page's banner and ``scalerl wait`` carry the verdict's own answers: a leave-one-out grid's cost of
each removed component against the base, and the warning when the runs got different work for the same compute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rl_core.scaling import sigmoid
from scalerl.cli.main import cli
from tests.web.conftest import LiveService, screenshot
from tests.web.data import assessed, create_experiment, open_experiment_at, post_curve

pytestmark = pytest.mark.browser


def _banner(page: Any, live: LiveService, exp_id: int, version: int) -> dict[str, Any]:
    open_experiment_at(page, live.url, exp_id, version)
    return page.evaluate(  # type: ignore[no-any-return]
        """() => ({
          text: document.getElementById('verdict').textContent,
          ablations: [...document.querySelectorAll('#verdict-ablations li')].map(li => ({
            component: li.dataset.component, finding: li.dataset.finding, text: li.textContent})),
          spread: (document.getElementById('verdict-work-spread') || {}).textContent || null,
        })"""
    )


def _wait(live: LiveService, exp_id: int, *extra: str) -> Any:
    env = {"SCALERL_HOME": str(Path("/nonexistent")), "SCALERL_URL": "", "SCALERL_TOKEN": ""}
    args = ["wait", str(exp_id), "--url", live.url, "--token", live.read_token, "--timeout", "1", "--poll", "0.2"]
    return CliRunner().invoke(cli, [*args, *extra], env=env)


def test_the_banner_and_wait_say_what_removing_each_component_costs(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-loo-answers", preset="scalerl", leave_one_out=True)
        for run in exp["runs"]:
            variant = run["name"].split(",seed=")[0]
            same = variant in ("base", "loo-no-npr")  # the same points: not shown to differ
            a = 0.56 if variant == "loo-no-fp32-head" else 0.64
            post_curve(api, run["id"], a, n=30, c_max=8000.0, seed=1 if same else run["id"])
        a = assessed(api, exp["id"])
    v = a["verdict"]
    seen = _banner(page, live, exp["id"], a["version"])
    rows = {x["component"]: x for x in seen["ablations"]}
    assert rows["loo-no-fp32-head"]["finding"] == "costs", rows
    assert (
        rows["loo-no-fp32-head"]["text"].startswith("no FP32 head: −0.0")
        and "P > 0.99" in rows["loo-no-fp32-head"]["text"]
    )
    assert rows["loo-no-npr"]["text"].startswith("no NPR: not shown to differ"), rows
    assert [x["text"] for x in seen["ablations"]] == [x["text"] for x in v["ablations"]]  # the stored lines
    screenshot(page, "verdict-leave-one-out")
    text = _wait(live, exp["id"])
    assert "leave-one-out, each removed component against the base recipe at the budget:" in text.stdout
    assert rows["loo-no-fp32-head"]["text"] in text.stdout and rows["loo-no-npr"]["text"] in text.stdout
    as_json = _wait(live, exp["id"], "--json")
    parsed = json.loads(as_json.stdout)
    findings = {x["component"]: x["finding"] for x in parsed["ablations"]}  # listed in component order
    assert parsed["ablation_summary"] == v["ablation_summary"] and findings["loo-no-fp32-head"] == "costs"
    assert "dashboard:" in as_json.stderr


def _worked(rate: float, seed: int) -> list[dict[str, Any]]:
    """One recipe's curve in steps, at ``rate`` steps per compute unit, to its budget."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(200.0, 8000.0, 40)
    steps = np.round(compute * rate).astype(int)
    y = np.clip(sigmoid(steps.astype(float), R0=0.3, A=0.65, B=1.8, C_mid=2500.0) + rng.normal(0, 0.004, 40), 0, 1)
    return [
        {"step": int(s), "compute": float(c), "pass_rate": float(v)} for s, c, v in zip(steps, compute, y, strict=True)
    ]


def test_the_banner_and_wait_warn_when_runs_got_different_work_for_the_same_compute(
    page: Any, live: LiveService
) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-work-spread", grid={"batch.prompts": [16, 32]})
        for run, rate in zip(exp["runs"], (1.5, 1.0), strict=True):
            api.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": _worked(rate, run["id"])}).raise_for_status()
        a = assessed(api, exp["id"])
    v = a["verdict"]
    assert v["work_spread"] is not None and not v["decided"], v
    seen = _banner(page, live, exp["id"], a["version"])
    assert seen["spread"] is not None and seen["spread"].startswith("Warning: the runs got different work")
    assert "steps per gpu_hours differ 1.50×" in seen["spread"] and "not decided on it" in seen["spread"]
    assert "Decided" not in seen["text"].split(":")[0]
    screenshot(page, "verdict-work-spread")
    text = _wait(live, exp["id"])
    assert f"warning: {v['work_spread']['warning']}" in text.stdout and text.exit_code != 0
