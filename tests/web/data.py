"""Test data for the browser tests, posted through the REST API like any trainer would.

Every experiment made here says in its description that its points are synthetic test data: noisy samples of
the paper's sigmoid with chosen parameters, not measurements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from tests.server.helpers import curve_points

if TYPE_CHECKING:
    from tests.web.conftest import LiveService

TEST_DATA = "browser-test data: synthetic sigmoid points posted by the tests"


def create_experiment(client: httpx.Client, name: str, **doc: Any) -> dict[str, Any]:
    body = {
        "name": name,
        "description": TEST_DATA,
        "task": "synthetic-addition",
        "model": "tiny",
        "budget": 8000.0,
        "compute_unit": "gpu_hours",
        **doc,
    }
    # Every run of these small grids in the answer, with its full recipe.
    res = client.post("/api/v1/experiments", json=body, params={"runs_limit": 256, "recipes": "true"})
    res.raise_for_status()
    out: dict[str, Any] = res.json()
    return out


def post_curve(
    client: httpx.Client, run_id: int, A: float, *, n: int = 24, c_max: float = 4000.0, seed: int = 0, **kw: Any
) -> dict[str, Any]:
    """Points of a sigmoid with ceiling ``A`` up to ``c_max`` (half the default budget), with training metrics."""
    points = curve_points(A, n=n, c_max=c_max, seed=seed, **kw)
    for i, p in enumerate(points):
        p["metrics"] = {
            "train/reward_mean": 2 * p["pass_rate"] - 1,
            "train/truncation_rate": max(0.0, 0.08 - 0.002 * i),
            "train/entropy": 1.2 / (1 + 0.05 * i),
            "train/staleness_mean": 3.5 + (i % 3) * 0.5,
        }
    res = client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points})
    res.raise_for_status()
    out: dict[str, Any] = res.json()
    return out


def grid_with_curves(
    live: LiveService, name: str, grid: dict[str, Any], ceilings: list[float], **curve: Any
) -> dict[str, Any]:
    """An experiment of ``grid`` whose i-th run gets ``post_curve(ceilings[i], seed=i, **curve)``, with the
    refitter drained (when it runs) so that its page shows every fit at once."""
    with live.client() as api:
        exp = create_experiment(api, name, grid=grid)
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], ceilings[i], seed=i, **curve)
    if live.ctx.refitter is not None:
        live.ctx.drain(30)
    return exp


def one_run_with_a_curve(
    live: LiveService, name: str, index: int, ceiling: float, **curve: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A two-run experiment (``batch.prompts`` 32 and 48) whose run ``index`` alone gets ``post_curve(ceiling,
    **curve)``: the experiment and that run."""
    with live.client() as api:
        exp = create_experiment(api, name, grid={"batch.prompts": [32, 48]})
        run: dict[str, Any] = exp["runs"][index]
        post_curve(api, run["id"], ceiling, **curve)
    return exp, run


def assessed(client: httpx.Client, experiment_id: int, timeout: float = 90.0) -> dict[str, Any]:
    """The experiment's assessment once it reflects every point posted so far (computed off the request path,
    coalesced every few seconds): polls ``/assessment`` until it is stored and not pending."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        res = client.get(f"/api/v1/experiments/{experiment_id}/assessment")
        res.raise_for_status()
        out: dict[str, Any] = res.json()
        if out["version"] >= 1 and not out["pending"]:
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"experiment {experiment_id} not assessed within {timeout} s: {out['verdict']}")
        time.sleep(0.2)


def set_status(live: LiveService, run_id: int, *steps: str, reason: str = "browser-test") -> None:
    """Move a run through the status transitions ``steps`` in the database, as the service's own transitions do."""
    from server.lifecycle.runs import transition
    from server.store.models import Run

    with live.ctx.sessions.begin() as session:
        run = session.get(Run, run_id)
        assert run is not None
        for to in steps:
            transition(session, run, to, f"{reason}: {to}", "browser-test")


def open_experiment_at(page: Any, url: str, experiment_id: int, version: int) -> None:
    """Open the experiment page and wait until it shows assessment ``version`` (the banner's "as of" line)."""
    page.goto(f"{url}/experiments/{experiment_id}")
    page.wait_for_function(
        f"() => /assessment v{version} of/.test((document.getElementById('verdict-as-of') || {{}}).textContent)"
    )
