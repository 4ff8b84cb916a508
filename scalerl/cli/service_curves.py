"""The finished runs of an experiment on the service, as curves for learning a prior (``scalerl prior build
--experiment``): the same :class:`~rl_core.scaling.corpus.Curve` that a folder of CSVs gives."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rl_core.scaling.corpus import Curve
from scalerl.client import Client

#: Run statuses whose curves are complete: a run stopped early or lost is a partial curve, and the worst runs are
#: the ones stopped early, so learning from them would bias the prior.
FINISHED = ("succeeded",)
MIN_POINTS = 6  # as load_curves


def _number(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def run_curve(name: str, points: list[dict[str, Any]]) -> Curve | None:
    """The (compute, pass rate) points of one run, sorted by compute; None with fewer than MIN_POINTS usable."""
    steps = np.array([_number(p.get("step")) for p in points])
    x = np.array([_number(p.get("compute")) for p in points])
    y = np.array([_number(p.get("pass_rate")) for p in points])
    ok = np.isfinite(steps) & np.isfinite(x) & np.isfinite(y)
    if int(ok.sum()) < MIN_POINTS:
        return None
    order = np.argsort(x[ok], kind="stable")
    return Curve(name, "compute", "pass_rate", steps[ok][order], x[ok][order], y[ok][order])


def experiment_curves(client: Client, experiment: str) -> tuple[list[Curve], list[str]]:
    """The finished runs of ``experiment`` (an id or a name) as curves named ``<experiment>/<run>``, so that each
    experiment is one source (one grid) for the prior; runs left out are returned as messages. Raises
    ``LookupError`` when there is no such experiment."""
    if experiment.isdigit():
        exp = client.request("GET", f"/api/v1/experiments/{int(experiment)}")
    else:
        exp = client.find_experiment(experiment)
        if exp is None:
            raise LookupError(f"no experiment named {experiment!r}")
    exp_id, exp_name = int(exp["id"]), str(exp["name"])
    runs = client.request("GET", "/api/v1/runs", params={"experiment_id": exp_id, "limit": 10_000})
    curves: list[Curve] = []
    skipped: list[str] = []
    for run in runs:
        label = f"experiment {exp_name}: run {run['name']}"
        if run["status"] not in FINISHED:
            skipped.append(f"{label}: {run['status']}, not finished (only {', '.join(FINISHED)} runs are learned from)")
            continue
        curve = run_curve(f"{exp_name}/{run['name']}", client.get_points(int(run["id"]), limit=100_000))
        if curve is None:
            skipped.append(f"{label}: fewer than {MIN_POINTS} points with compute and pass rate")
            continue
        curves.append(curve)
    return curves, skipped
