"""Run comparison: one metric (the pass rate or any logged training metric) of chosen runs of an experiment, against
step, compute or wall time, downsampled per run; the runs carry their seed group (the same recipe, other seeds) so
the page can draw a group as a mean with a band.

Wall time is the seconds since the run's first stored point, by the time the service stored each point
(``received_at``: arrival, not the trainer's clock); points stored before that was recorded have no time and are
left out (counted in ``without_time``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.assess.charts.downsample import lttb, rounded
from server.assess.charts.schemas import MetricRun, MetricSeries
from server.lifecycle.experiments import compute_unit_label
from server.store.models import Experiment, Run, StoredPoint

PASS_RATE = "pass_rate"
XAxis = Literal["step", "compute", "time"]
X_LABELS: dict[str, str] = {
    "step": "step",
    "compute": "compute",
    "time": "time since first point (as received), s",
}
_SEED = re.compile(r"(^|,)seed=[^,]*")


class UnknownRuns(ValueError):
    """Run ids that are not runs of the experiment."""


def group_of(run: Run) -> tuple[str, str]:
    """The seed group of a run (its recipe overrides) and a label for it (the name without its seed)."""
    key = json.dumps(run.overrides or {}, sort_keys=True, default=str)
    label = _SEED.sub("", run.name).strip(",") or "base"
    return key, label


def _x_value(
    x_axis: XAxis, step: int, compute: float, received: datetime | None, first: datetime | None
) -> float | None:
    if x_axis == "step":
        return float(step)
    if x_axis == "compute":
        return float(compute)
    if received is None or first is None:
        return None
    return (received - first).total_seconds()


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
            select(
                StoredPoint.step,
                StoredPoint.compute,
                StoredPoint.pass_rate,
                StoredPoint.metrics,
                StoredPoint.received_at,
            )
            .where(StoredPoint.run_id == run.id)
            .order_by(StoredPoint.step)
        ).all()
        first = min((r.received_at for r in rows if r.received_at is not None), default=None)
        pairs: list[tuple[float, float]] = []
        untimed = 0
        for step, compute, pass_rate, metrics, received in rows:
            available.update(k for k, v in (metrics or {}).items() if isinstance(v, int | float))
            value = pass_rate if metric == PASS_RATE else (metrics or {}).get(metric)
            if not (isinstance(value, int | float) and math.isfinite(value)):
                continue
            xv = _x_value(x_axis, step, compute, received, first)
            if xv is None:
                untimed += 1
            else:
                pairs.append((xv, float(value)))
        pairs.sort(key=lambda p: p[0])  # stable: by step where x ties (a batch shares one arrival time)
        x = np.array([p[0] for p in pairs], dtype=np.float64)
        y = np.array([p[1] for p in pairs], dtype=np.float64)
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
                without_time=untimed,
            )
        )
    return MetricSeries(
        experiment_id=experiment.id,
        metric=metric,
        x=x_axis,
        x_label=X_LABELS[x_axis],
        compute_unit=compute_unit_label(experiment),
        metrics=[PASS_RATE, *sorted(available)],
        runs=out,
    )
