"""The finished runs of an experiment on the service, as curves for learning a prior (``scalerl prior build
--experiment``): the same :class:`~rl_core.scaling.measure.corpus.Curve` that a folder of CSVs gives."""

from __future__ import annotations

from typing import Any

import numpy as np

from rl_core.scaling.measure.corpus import MIN_CURVE_POINTS, Curve, clean_curve
from scalerl.client import Client

#: Run statuses whose curves are complete: a run stopped early or lost is a partial curve, and the worst runs are
#: the ones stopped early, so learning from them would bias the prior.
FINISHED = ("succeeded",)


def run_curve(name: str, points: list[dict[str, Any]]) -> Curve | None:
    """The (compute, pass rate) points of one run (the API's numbers; a missing value is NaN), sorted by compute;
    None with fewer than MIN_CURVE_POINTS usable."""
    steps, x, y = (np.array([p.get(k) for p in points], dtype=np.float64) for k in ("step", "compute", "pass_rate"))
    return clean_curve(name, "compute", "pass_rate", steps, x, y)


def experiment_curves(client: Client, experiment: str) -> tuple[list[Curve], list[str]]:
    """The finished runs of ``experiment`` (an id or a name) as curves named ``<experiment>/<run>``, so that each
    experiment is one source (one grid) for the prior; runs left out are returned as messages. Raises
    ``LookupError`` when there is no such experiment."""
    exp = client.lookup_experiment(experiment)
    if exp is None:
        raise LookupError(f"no experiment named {experiment!r}")
    exp_id, exp_name = int(exp["id"]), str(exp["name"])
    curves: list[Curve] = []
    skipped: list[str] = []
    for run in client.list_runs(exp_id):
        label = f"experiment {exp_name}: run {run.name}"
        if run.status not in FINISHED:
            skipped.append(f"{label}: {run.status}, not finished (only {', '.join(FINISHED)} runs are learned from)")
            continue
        curve = run_curve(f"{exp_name}/{run.name}", client.get_points(run.id, limit=100_000))
        if curve is None:
            skipped.append(f"{label}: fewer than {MIN_CURVE_POINTS} points with compute and pass rate")
            continue
        curves.append(curve)
    return curves, skipped
