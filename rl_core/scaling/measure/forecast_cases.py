"""Forecast cases: every (curve, cut-off, fitter) of a collection, with what each forecaster said about the tail.

A case keeps, for the held-out points of one curve cut at one fraction of its x range, the sigmoid's posterior
predictive summary (median and the equal-tailed 80% band), the saturating power law's values and the last observed
value, plus the features that say how far the forecast reaches (the compute seen, the fit's C_mid median, whether
the ceiling is identified). The calibration of :mod:`rl_core.scaling.fit.calibration` is learned from and scored
on these cases (:mod:`.calibration_learn`), and they are cheap to rescore: every fit is made once.

Cases are plain data (``to_json``/``from_json``) so that a collection is fitted once and its cases cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl_core.scaling.fit.forecast import CurveFit, FitOptions, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.posterior import equal_tailed
from rl_core.scaling.fit.summary import summarize
from rl_core.scaling.measure.backtest import SATURATION_FRAC90, cut_at, grid_families
from rl_core.scaling.measure.corpus import Curve, near_duplicate_groups

#: The fitters whose forecasts are kept: the per-run fit and the grid's joint fit (the service's).
FITTERS = ("fast", "grid")
#: The band a case stores (the forecaster's default level).
CASE_LEVEL = 0.8


@dataclass(frozen=True)
class ForecastCase:
    """One curve cut at ``cutoff`` and forecast by ``fitter``; the lists run over the held-out tail points."""

    collection: str
    curve: str
    group: str
    """The curve's near-duplicate group (a group counts once in a summary)."""
    saturated: bool
    cutoff: float
    fitter: str
    x_seen: float
    """The largest compute in the fit window."""
    c_mid: float
    """The posterior median of C_mid (how much of the bend the window saw: ``x_seen / c_mid``)."""
    identified: bool
    x: list[float]
    y: list[float]
    sigmoid: list[float]
    """Median of the sigmoid's predictive draws (the one posterior summary's value)."""
    point: list[float]
    """The least-squares (or penalised) point fit's curve."""
    lo: list[float]
    hi: list[float]
    """The sigmoid's equal-tailed 80% predictive band."""
    power_law: list[float] | None
    """The saturating power law fitted on the same window (``None`` where it could not be fitted)."""
    last: float
    """The last observed value in the window."""
    n_fit: int = 0
    """Points the fit used."""
    sse_sigmoid: float | None = None
    sse_power_law: float | None = None
    """In-window sums of squared residuals of the sigmoid's point fit and of the power law (their evidence)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> ForecastCase:
        return ForecastCase(**d)


def _case(collection: str, curve: Curve, group: str, cutoff: float, fitter: str, fit: CurveFit) -> ForecastCase | None:
    cut = cut_at(curve, cutoff)
    window, tail = curve.x <= cut, curve.x > cut
    if not tail.any() or fit.params is None or fit.samples is None or not fit.usable:
        return None
    xt = curve.x[tail]
    draws = fit.samples.measurements(xt)
    lo, hi = equal_tailed(draws, CASE_LEVEL)
    est = summarize(fit, None)  # the calibration learns on the bound rule (calibration.sigmoid_weight)
    c_mid = est.value("C_mid")
    return ForecastCase(
        collection=collection,
        curve=curve.name,
        group=group,
        saturated=bool(curve.frac90 < SATURATION_FRAC90),
        cutoff=float(cutoff),
        fitter=fitter,
        x_seen=float(curve.x[window].max()),
        c_mid=float(c_mid) if c_mid is not None else float("nan"),
        identified=bool(est.ceiling_identified),
        x=[float(v) for v in xt],
        y=[float(v) for v in curve.y[tail]],
        sigmoid=[float(v) for v in np.median(draws, axis=0)],
        point=[float(v) for v in fit.params(xt)],
        lo=[float(v) for v in lo],
        hi=[float(v) for v in hi],
        power_law=None if fit.power_law is None else [float(v) for v in fit.power_law(xt)],
        last=float(curve.y[window][-1]),
        n_fit=int(fit.n_points),
        sse_sigmoid=fit.sse,
        sse_power_law=fit.power_law_sse,
    )


def collect_cases(
    collection: str,
    curves: Sequence[Curve],
    cutoffs: Sequence[float],
    options: FitOptions | None = None,
    directory: str | Path | None = None,
) -> list[ForecastCase]:
    """Every case of ``curves`` at ``cutoffs`` for both fitters (grid families as the backtest forms them; a run
    alone in its family is its own grid fit, which is the per-run fit)."""
    opts = options or FitOptions()
    groups = near_duplicate_groups(curves)
    families = grid_families(curves, directory)
    members: dict[str, list[Curve]] = {}
    for c in curves:
        members.setdefault(families[c.name], []).append(c)
    out: list[ForecastCase] = []
    for f in cutoffs:
        windows = {c.name: (c.x[c.x <= cut_at(c, f)], c.y[c.x <= cut_at(c, f)]) for c in curves}
        per_run = {name: fit_curve(x, y, opts) for name, (x, y) in windows.items()}
        grid: dict[str, CurveFit] = {}
        for runs in members.values():
            fits = fit_grid([windows[c.name] for c in runs], opts) if len(runs) >= 2 else [per_run[runs[0].name]]
            grid.update({c.name: fit for c, fit in zip(runs, fits, strict=True)})
        for c in curves:
            for fitter, fit in (("fast", per_run[c.name]), ("grid", grid[c.name])):
                case = _case(collection, c, groups[c.name], f, fitter, fit)
                if case is not None:
                    out.append(case)
    return out
