"""The verdict answers a leave-one-out grid's own question (each removed component against the base), and it is not
decided on a difference that the runs' different work for the same compute could explain."""

from __future__ import annotations

from typing import Any

import numpy as np

from rl_core.scaling.fit.model import sigmoid
from tests.server.conftest import Service
from tests.server.helpers import curve_points, post_points, sweep_doc


def _loo_doc(name: str = "loo") -> dict[str, Any]:
    return {
        "name": name,
        "preset": "scalerl",
        "leave_one_out": True,
        "seeds": [0],
        "task": "gsm8k",
        "model": "tiny",
        "budget": 8000.0,
    }


def _verdict(service: Service, exp_id: int, **params: Any) -> dict[str, Any]:
    r = service.client.get(f"/api/v1/experiments/{exp_id}/verdict", params=params, headers=service.read)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_a_leave_one_out_verdict_says_what_removing_each_component_costs(service: Service) -> None:
    exp = service.client.post("/api/v1/experiments", json=_loo_doc(), headers=service.write).json()
    runs = {r["name"].split(",seed=")[0]: r["id"] for r in exp["runs"]}
    assert set(runs) >= {"base", "loo-no-fp32-head", "loo-no-npr"}
    ceilings = {"base": 0.66, "loo-no-fp32-head": 0.58, "loo-loss-dapo": 0.62}
    for variant, run_id in runs.items():
        # loo-no-npr reports the base's very points: nothing to tell them apart; the others end lower or level.
        same = variant in ("base", "loo-no-npr")
        points = curve_points(A=ceilings.get(variant, 0.66), n=40, seed=1 if same else run_id)
        post_points(service, run_id, points)
    service.drain()
    v = _verdict(service, exp["id"])
    found = {a["component"]: a for a in v["ablations"]}
    assert set(found) == set(runs) - {"base"}, found
    head = found["loo-no-fp32-head"]
    assert head["label"] == "no FP32 head" and head["finding"] == "costs" and head["difference"] < -0.05
    assert (
        head["probability_lower"] > 0.99
        and head["text"].startswith("no FP32 head: −0.0")
        and "P > 0.99" in head["text"]
    )
    assert found["loo-loss-dapo"]["finding"] == "costs"  # every clear loser is named
    npr = found["loo-no-npr"]
    assert npr["finding"] == "not_shown" and npr["text"].startswith("no NPR: not shown to differ"), npr
    assert abs(npr["difference"]) < 0.005
    summary = v["ablation_summary"]
    assert summary.index("no FP32 head") < summary.index("no NPR: not shown to differ")  # the losses first
    # The same numbers as the best-vs-runner-up machinery: the base's value is the ranking's.
    values = {r["run_name"]: r["V_budget"] for r in v["ranking"]}
    base_name = next(n for n in values if n.startswith("base,"))
    head_name = next(n for n in values if n.startswith("loo-no-fp32-head,"))
    assert abs(head["difference"] - (values[head_name] - values[base_name])) < 0.01
    # Re-read at another confidence, the findings follow (nothing is recomputed).
    strict = _verdict(service, exp["id"], min_confidence=0.999999)
    assert {a["component"]: a["finding"] for a in strict["ablations"]}["loo-no-npr"] == "not_shown"
    # The experiment's stored assessment carries the same verdict.
    stored = service.client.get(f"/api/v1/experiments/{exp['id']}/assessment", headers=service.read).json()
    assert stored["verdict"]["ablation_summary"] == summary


def _points_with_work(rate: float, ceiling: float, seed: int) -> list[dict[str, Any]]:
    """A run whose pass rate follows one sigmoid in *steps* (the same recipe), reporting ``rate`` steps per unit."""
    rng = np.random.default_rng(seed)
    compute = np.linspace(200.0, 8000.0, 40)
    steps = np.round(compute * rate).astype(int)
    y = sigmoid(steps.astype(float), R0=0.3, A=ceiling, B=1.8, C_mid=2500.0) + rng.normal(0, 0.004, steps.size)
    return [
        {"step": int(s), "compute": float(c), "pass_rate": float(v)}
        for s, c, v in zip(steps, compute, np.clip(y, 0, 1), strict=True)
    ]


def _two_runs_with_work(service: Service, name: str, rates: tuple[float, float], **doc: Any) -> tuple[int, int, int]:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(name=name, **doc), headers=service.write).json()
    a, b = exp["runs"][0]["id"], exp["runs"][1]["id"]
    post_points(service, a, _points_with_work(rates[0], 0.65, seed=3))
    post_points(service, b, _points_with_work(rates[1], 0.65, seed=4))
    service.drain()
    return exp["id"], a, b


def test_runs_that_got_different_work_for_the_same_compute_warn_and_decide_nothing(service: Service) -> None:
    # One recipe's curve in steps; run a got 1.5× the steps per compute unit of run b (b's compute was inflated).
    exp_id, a, b = _two_runs_with_work(service, "work-spread", (1.5, 1.0))
    v = _verdict(service, exp_id)
    assert v["best_run_id"] == a and v["runner_up_id"] == b and v["confidence"] >= 0.9, v  # would be decided
    w = v["work_spread"]
    assert w is not None and abs(w["ratio"] - 1.5) < 0.02 and w["threshold"] == 1.2 and w["robust"] is False
    assert "steps per gpu_hours differ 1.50×" in w["warning"]
    assert v["decided"] is False and "[not decided: the runs' steps per compute unit differ 1.50×" in v["reason"]
    assert "a difference the spread could explain" in v["reason"]
    stored = service.client.get(f"/api/v1/experiments/{exp_id}/assessment", headers=service.read).json()
    assert stored["verdict"]["work_spread"]["warning"] == w["warning"] and not stored["verdict"]["decided"]
    # The very same grid with the check off (max_work_spread: null) is decided: the spread alone kept it open.
    off_id, _, _ = _two_runs_with_work(service, "work-spread-off", (1.5, 1.0), policy={"max_work_spread": None})
    off = _verdict(service, off_id)
    assert off["decided"] is True and off["work_spread"] is None, off


def test_a_lead_won_with_less_work_per_compute_is_decided_with_the_warning(service: Service) -> None:
    # Run b got 1.5× the steps per unit yet ends lower: the spread cannot explain a's lead.
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(name="less-work"), headers=service.write).json()
    a, b = exp["runs"][0]["id"], exp["runs"][1]["id"]
    post_points(service, a, _points_with_work(1.0, 0.70, seed=3))
    post_points(service, b, _points_with_work(1.5, 0.55, seed=4))
    service.drain()
    v = _verdict(service, exp["id"])
    assert v["best_run_id"] == a and v["decided"] is True, v
    w = v["work_spread"]
    assert w is not None and w["robust"] is True and w["best_vs_runner_up"] < 1.0 and w["warning"]


def test_a_recipe_that_buys_more_steps_for_the_same_tokens_is_not_a_work_spread(service: Service) -> None:
    # Run a took 1.5x the steps per unit of run b with shorter responses: the same tokens per unit (the engine's
    # counters on every point). That is the recipe's doing, not contention: no warning, and the lead decides.
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(name="same-tokens"), headers=service.write).json()
    a, b = exp["runs"][0]["id"], exp["runs"][1]["id"]
    for rid, rate, seed in ((a, 1.5, 3), (b, 1.0, 4)):
        points = _points_with_work(rate, 0.65, seed=seed)
        for p in points:
            tokens = 100.0 * p["compute"]  # 100 tokens per compute unit, whatever the steps
            p["metrics"] = {"compute/generator_tokens": 0.4 * tokens, "compute/trainer_tokens": 0.6 * tokens}
        post_points(service, rid, points)
    service.drain()
    v = _verdict(service, exp["id"])
    assert v["best_run_id"] == a and v["work_spread"] is None and v["decided"] is True, v
    # The steps alone (a trainer without token counters) would have held it: the 1.5x test above.
