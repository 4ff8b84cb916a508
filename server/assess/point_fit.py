"""A run's fast point fit, kept off the request path: the stored points read (thinned by rank), and the fit stored.

Invariants: the fit sees at most :data:`MAX_POINT_FIT_POINTS` points of a long curve (the last one kept), read by
rank through ``ix_metric_points_curve`` so its cost does not grow with what the run has stored; a stored point fit
becomes the run's latest fit only if it reached at least as far (compute) as the current one. Coalesced per run by
:class:`server.assess.background.PointRefit`: :func:`load_fit_curve` and the fit with no transaction open, then
:func:`store_point_fit` in a short transaction of its own, so the single SQLite writer is never held while a curve
is fitted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

import numpy as np
from sqlalchemy import Table, select, text
from sqlalchemy.orm import Session

from rl_core.scaling import CurveFit
from server.assess.forecasting import Curve, emit_fit, load_curve, store_fit
from server.store.models import FitSnapshot, Run, StoredPoint

#: The point fit sees at most this many points of a long curve (evenly thinned, the last one
#: kept); the full fit with intervals, off the request path, sees them all.
MAX_POINT_FIT_POINTS = 2000


def thin(curve: Curve, limit: int = MAX_POINT_FIT_POINTS) -> Curve:
    """At most ``limit`` points of ``curve``, evenly spaced in step order, first and last included."""
    n = len(curve.compute)
    if n <= limit:
        return curve
    keep = np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))
    return Curve(curve.compute[keep], curve.pass_rate[keep])


#: The points of a run at the given ranks (one bound parameter, whatever their number: an array / a JSON array).
_SQLITE_BY_RANK = text(
    "SELECT step, compute, pass_rate FROM metric_points "
    "WHERE run_id = :run_id AND curve_index IN (SELECT value FROM json_each(:ranks))"
)
_PG_BY_RANK = text(
    "SELECT step, compute, pass_rate FROM metric_points "
    "WHERE run_id = :run_id AND curve_index = ANY(CAST(:ranks AS bigint[]))"
)


def load_fit_curve(session: Session, run_id: int, limit: int = MAX_POINT_FIT_POINTS) -> Curve:
    """``thin(load_curve(...), limit)`` read by rank: the at most ``limit`` evenly spaced points with a pass rate
    (first and last included) are looked up by ``curve_index`` through ``ix_metric_points_curve``, so the cost does
    not grow with what the run has stored. Equal to ``thin(load_curve(...))`` when the points arrived in step order
    (the usual case; a step sent late is ranked after the ones stored before it). Runs with unranked points (stored
    outside :func:`ingest`) are read whole."""
    t = cast(Table, StoredPoint.__table__)
    n = session.scalar(select(Run.curve_points).where(Run.id == run_id)) or 0
    base = select(t.c.step, t.c.compute, t.c.pass_rate).where(t.c.run_id == run_id)
    if n <= limit:
        rows = list(session.execute(base.where(t.c.curve_index >= 0)).all())  # a concurrent batch may add some
    else:
        keep = np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64)).tolist()
        if session.get_bind().dialect.name == "postgresql":
            rows = list(session.execute(_PG_BY_RANK, {"run_id": run_id, "ranks": keep}).all())
        else:
            rows = list(session.execute(_SQLITE_BY_RANK, {"run_id": run_id, "ranks": json.dumps(keep)}).all())
        n = len(keep)
    if len(rows) < n:
        return thin(load_curve(session, run_id), limit)
    rows.sort(key=lambda r: r.step)
    curve = Curve(
        np.asarray([r.compute for r in rows], dtype=np.float64),
        np.asarray([r.pass_rate for r in rows], dtype=np.float64),
    )
    return thin(curve, limit)


def point_fit_stale(session: Session, run: Run) -> bool:
    """True when ``run`` has points with a pass rate that its latest fit has not seen: the fit is older than the
    stored points (the server died between the points' commit and their refit). The newest evaluation is the one of
    top rank, and a point fit always keeps it, so one indexed lookup decides."""
    if run.curve_points <= 0:
        return False
    if run.latest_fit_id is None:
        return True
    t = cast(Table, StoredPoint.__table__)
    top = session.scalar(
        select(t.c.compute).where(t.c.run_id == run.id, t.c.curve_index == run.curve_points - 1).limit(1)
    )
    fitted = session.scalar(select(FitSnapshot.compute_max).where(FitSnapshot.id == run.latest_fit_id))
    return top is not None and (fitted is None or fitted < top)


def stale_point_fits(session: Session, limit: int = 1000) -> list[int]:
    """Runs whose latest fit is older than their stored evaluations (:func:`point_fit_stale`), for a sweep at start."""
    t = cast(Table, StoredPoint.__table__)
    top = (
        select(t.c.compute)
        .where(t.c.run_id == Run.id, t.c.curve_index == Run.curve_points - 1)
        .limit(1)
        .scalar_subquery()
    )
    fitted = select(FitSnapshot.compute_max).where(FitSnapshot.id == Run.latest_fit_id).scalar_subquery()
    stmt = (
        select(Run.id)
        .where(Run.curve_points > 0, (Run.latest_fit_id.is_(None)) | (fitted < top))
        .order_by(Run.id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def store_point_fit(session: Session, run_id: int, fit: CurveFit, factors: Sequence[float]) -> FitSnapshot:
    """Store the point fit and emit its event; it becomes the run's latest fit unless a concurrent request already
    stored a fit that reached further (a larger compute)."""
    run = session.scalar(select(Run).where(Run.id == run_id).with_for_update())
    assert run is not None  # runs are never deleted
    current = session.get(FitSnapshot, run.latest_fit_id) if run.latest_fit_id is not None else None
    newest = current is None or float(fit.compute_max) >= current.compute_max
    snap = store_fit(session, run, fit, "point", factors, make_latest=newest)
    emit_fit(session, run, snap)
    return snap
