"""Run comparison: one metric (the pass rate or any logged training metric) of chosen runs of an experiment, against
step or compute, downsampled per run; the runs carry their seed group (the same recipe, other seeds) so the page can
draw a group as a mean with a band."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.models import Experiment, Run, StoredPoint
from server.routes.dashboard.downsample import lttb, rounded
from server.routes.dashboard.schemas import MetricRun, MetricSeries

PASS_RATE = "pass_rate"
XAxis = Literal["step", "compute"]
_SEED = re.compile(r"(^|,)seed=[^,]*")


class UnknownRuns(ValueError):
    """Run ids that are not runs of the experiment."""


def group_of(run: Run) -> tuple[str, str]:
    """The seed group of a run (its recipe overrides) and a label for it (the name without its seed)."""
    key = json.dumps(run.overrides or {}, sort_keys=True, default=str)
    label = _SEED.sub("", run.name).strip(",") or "base"
    return key, label


def metric_series(
    session: Session, experiment: Experiment, run_ids: Sequence[int], metric: str, x_axis: XAxis, max_points: int
) -> MetricSeries:
    runs = session.scalars(select(Run).where(Run.experiment_id == experiment.id).order_by(Run.id)).all()
    by_id = {r.id: r for r in runs}
    unknown = [i for i in run_ids if i not in by_id]
    if unknown:
        raise UnknownRuns(f"run: {unknown} are not runs of experiment {experiment.id}")
    chosen = [by_id[i] for i in run_ids] if run_ids else list(runs[:8])
    available: set[str] = set()
    out: list[MetricRun] = []
    for run in chosen:
        rows = session.execute(
            select(StoredPoint.step, StoredPoint.compute, StoredPoint.pass_rate, StoredPoint.metrics)
            .where(StoredPoint.run_id == run.id)
            .order_by(StoredPoint.step)
        ).all()
        xs: list[float] = []
        ys: list[float] = []
        for step, compute, pass_rate, metrics in rows:
            available.update(k for k, v in (metrics or {}).items() if isinstance(v, int | float))
            value = pass_rate if metric == PASS_RATE else (metrics or {}).get(metric)
            if isinstance(value, int | float) and math.isfinite(value):
                xs.append(float(step if x_axis == "step" else compute))
                ys.append(float(value))
        x, y = np.array(xs, dtype=np.float64), np.array(ys, dtype=np.float64)
        keep = lttb(x, y, max_points) if x.size else np.empty(0, dtype=np.int64)
        group, label = group_of(run)
        out.append(
            MetricRun(
                run_id=run.id,
                name=run.name,
                seed=run.seed,
                group=group,
                group_label=label,
                x=rounded(x[keep]),
                y=rounded(y[keep]),
            )
        )
    return MetricSeries(
        experiment_id=experiment.id,
        metric=metric,
        x=x_axis,
        compute_unit=str(experiment.document.get("compute_unit", "compute")),
        metrics=[PASS_RATE, *sorted(available)],
        runs=out,
    )
