"""Backtesting forecasters on recorded curves: fit on the start of each curve, predict the rest.

For each curve and cut-off f, the fit window is x <= x_min + f (x_max - x_min) and the held-out tail is the
rest. Methods: ``fast`` and ``grid`` (the forecast as the service shows it: the calibrated value and band of
:mod:`rl_core.scaling.fit.calibration` from a per-run or a grid fit), ``paper`` (the paper's fitter, its point fit),
``power_law`` (fitted on the same window) and ``last_value`` (the last observed pass rate carried forward). Per case:
tail MAE, absolute error at the last point, and the share of held-out points inside the predictive band (``fast``,
``grid``: the calibrated band at the fit's level; ``paper``: the paper's own ±0.02 margin on A; the others have
none).

Two properties of a collection of curves distort a plain average, so the summary corrects for them:
- near-duplicates (runs of one setting that differ only in system options) are grouped and count once;
- curves that saturate almost at once (90% of their gain within the first 10% of the x range) make every method
  look good; the headline rows use the informative curves only, and the all-curves rows are reported beside them.
Every summary row compares the methods on the same cases: a (curve, cut-off) enters only if every method
produced a forecast for it; the cases a method could not forecast are counted separately.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rl_core.scaling.fit.calibration import ForecastCalibration, forecast_summary
from rl_core.scaling.fit.fit_paper import PaperGrid
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.fit.prior import ShapePrior, load_prior
from rl_core.scaling.measure.corpus import Curve, near_duplicate_groups, source_of
from rl_core.scaling.measure.prior_build import PriorCorpus

#: A manifest in the backtest directory that names grids explicitly: {"grid name": ["curve name", ...], ...}.
GRIDS_MANIFEST = "grids.json"
#: Runs whose first evaluations differ by less than this share a base checkpoint (grid rule, see grid_families).
SAME_START_TOLERANCE = 0.005

METHODS = ("fast", "paper", "power_law", "last_value", "grid")
DEFAULT_METHODS = ("fast", "paper", "power_law", "last_value")
DEFAULT_CUTOFFS = (0.3, 0.5)
PAPER_MARGIN = 0.02
#: A curve that reaches 90% of its gain within this fraction of its x range saturates almost at once: it is a weak
#: test of extrapolation (the threshold of shared/curves/SOURCES.md) and is left out of the informative subset.
SATURATION_FRAC90 = 0.1


@dataclass(frozen=True)
class Case:
    """One (curve, cut-off, method) result; metrics are ``None`` when the method produced no forecast."""

    curve: str
    cutoff: float
    method: str
    n_fit: int
    n_tail: int
    tail_mae: float | None
    last_error: float | None
    coverage: float | None
    status: str


@dataclass
class Report:
    curves: list[Curve]
    cases: list[Case]
    groups: dict[str, str]
    """curve name -> group name (its near-duplicate setting)."""
    saturated: dict[str, bool]
    cutoffs: tuple[float, ...]
    methods: tuple[str, ...]
    skipped: list[str] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)
    """curve name -> grid family (grid mode); a family of one is a run fitted on its own."""
    prior_notes: list[str] = field(default_factory=list)


def _metrics(
    pred: FloatArray, lo: FloatArray | None, hi: FloatArray | None, y: FloatArray
) -> tuple[float, float, float | None]:
    err = np.abs(pred - y)
    cov = None if lo is None or hi is None else float(np.mean((y >= lo) & (y <= hi)))
    return float(np.mean(err)), float(err[-1]), cov


def cut_at(curve: Curve, cutoff: float) -> float:
    """The x up to which a curve is fitted at a cut-off (a fraction of its x range); later points are the tail."""
    return float(curve.x[0] + cutoff * (curve.x[-1] - curve.x[0]))


def backtest_curve(
    curve: Curve,
    cutoff: float,
    methods: Iterable[str],
    options: FitOptions,
    grid_fit: CurveFit | None = None,
    calibration: ForecastCalibration | None = None,
) -> list[Case]:
    """All methods on one curve at one cut-off; ``grid_fit`` is this run's fit from its grid (method ``grid``).
    ``fast`` and ``grid`` are scored as the forecast a person reads (:mod:`rl_core.scaling.fit.calibration`, with
    ``calibration`` or the shipped one; :data:`~rl_core.scaling.fit.calibration.RAW` for the sigmoid's raw
    posterior)."""
    cut = cut_at(curve, cutoff)
    fit_mask = curve.x <= cut
    xs, ys = curve.x[fit_mask], curve.y[fit_mask]
    xt, yt = curve.x[~fit_mask], curve.y[~fit_mask]
    n_fit, n_tail = int(xs.size), int(xt.size)
    out: list[Case] = []
    fits: dict[str, CurveFit] = {}

    def none_case(method: str, status: str) -> Case:
        return Case(curve.name, cutoff, method, n_fit, n_tail, None, None, None, status)

    for method in methods:
        if n_tail == 0:
            out.append(none_case(method, "no held-out points"))
            continue
        if method == "last_value":
            out.append(
                Case(
                    curve.name, cutoff, method, n_fit, n_tail, *_metrics(np.full_like(yt, ys[-1]), None, None, yt), "ok"
                )
            )
            continue
        if method in ("fast", "paper", "grid"):
            if method == "grid":
                fit = grid_fit if grid_fit is not None else fits.get("fast") or fit_curve(xs, ys, options)
            else:
                grid = PaperGrid.scaled_to(xs[xs > 0], ys) if method == "paper" else None
                fit = fit_curve(xs, ys, options, method=method, paper_grid=grid, intervals=method == "fast")
            fits[method] = fit
            if fit.params is None:
                out.append(none_case(method, fit.status))
                continue
            pred = fit.params(xt)
            lo: FloatArray | None
            hi: FloatArray | None
            summary = forecast_summary(fit, xt, "measurement", calibration=calibration)
            if method in ("fast", "grid") and summary is not None:
                pred, lo, hi = summary  # the forecast as a person reads it: calibrated value and band
            elif method in ("fast", "grid"):
                lo = hi = None
            else:
                p = fit.params
                band = [
                    type(p)(p.R0, min(1.0, max(0.0, p.A + d)), p.B, p.C_mid)(xt) for d in (-PAPER_MARGIN, PAPER_MARGIN)
                ]
                lo, hi = np.minimum(*band), np.maximum(*band)
            out.append(Case(curve.name, cutoff, method, n_fit, n_tail, *_metrics(pred, lo, hi, yt), fit.status))
            continue
        if method == "power_law":
            base = fits.get("fast") or fit_curve(xs, ys, options, intervals=False)
            if base.power_law is None:
                out.append(none_case(method, "no power-law fit"))
                continue
            out.append(
                Case(curve.name, cutoff, method, n_fit, n_tail, *_metrics(base.power_law(xt), None, None, yt), "ok")
            )
            continue
        raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    return out


def grid_families(curves: Sequence[Curve], directory: str | Path | None = None) -> dict[str, str]:
    """Curve name -> grid family. A ``grids.json`` manifest in ``directory`` names grids explicitly; otherwise the
    curves of one sub-directory (``<grid>/<run>.csv``, as the engine grids are recorded) are one grid, and top-level
    curves of the same source with the same metric column, sampled at the same steps (one evaluation schedule),
    whose first evaluations agree within SAME_START_TOLERANCE (one base checkpoint on one evaluation set) are one
    grid. Curves in no grid are families of one."""
    family = {c.name: c.name for c in curves}
    manifest = Path(directory) / GRIDS_MANIFEST if directory is not None else None
    if manifest is not None and manifest.is_file():
        for grid, members in json.loads(manifest.read_text()).items():
            for name in members:
                if name in family:
                    family[name] = str(grid)
        return family
    for c in curves:
        if "/" in c.name:
            family[c.name] = c.name.rpartition("/")[0]  # a sub-directory is one recorded grid (the engine grids)
    for i, a in enumerate(curves):
        if family[a.name] != a.name:
            continue
        for b in curves[i + 1 :]:
            if (
                family[b.name] == b.name
                and source_of(a.name) == source_of(b.name)
                and a.name.rpartition("/")[0] == b.name.rpartition("/")[0]
                and a.y_column == b.y_column
                and np.array_equal(a.steps, b.steps)
                and abs(float(a.y[0]) - float(b.y[0])) < SAME_START_TOLERANCE
            ):
                family[b.name] = a.name
    return family


def leave_one_source_out_priors(curves: Sequence[Curve], notes: list[str]) -> dict[str, ShapePrior | None]:
    """For each source of ``curves``: the shape prior and its extrapolation error learned from the other sources'
    curves (never its own). A collection of one source falls back to the shipped prior if that did not learn from
    this source, else flat."""
    corpus = PriorCorpus(curves)
    out: dict[str, ShapePrior | None] = {}
    for source in sorted(corpus.sources):
        others = sorted(corpus.sources - {source})
        if others and corpus.has_shapes(exclude={source}):
            prior = corpus.prior(version="backtest-loso", exclude={source})
            out[source] = prior
            sd = prior.extrapolation_sd
            notes.append(f"{source}: prior and extrapolation error ({sd:.4f}/e-fold) from {', '.join(others)}")
            continue
        shipped = load_prior()
        if source in shipped.sources:
            out[source] = None
            notes.append(f"{source}: no other source to learn a prior from; scored with flat priors")
        else:
            out[source] = shipped
            notes.append(f"{source}: scored with the shipped prior {shipped.version} (learned from other sources)")
    return out


def run_backtest(
    curves: Sequence[Curve],
    cutoffs: Sequence[float] = DEFAULT_CUTOFFS,
    methods: Sequence[str] = DEFAULT_METHODS,
    options: FitOptions | None = None,
    directory: str | Path | None = None,
    calibration: ForecastCalibration | None = None,
) -> Report:
    """Backtest every method on every curve at every cut-off. With ``prior="public"`` (the shipped prior), each
    curve is scored with a prior learned the same way leave-one-source-out (:func:`leave_one_source_out_priors`),
    never the shipped one that saw it; ``None`` (flat priors, the default) is used as is;
    a :class:`ShapePrior` in ``options`` is used as given (a note says when it learned from a scored source).
    Method ``grid`` fits each grid family (:func:`grid_families`) jointly with :func:`fit_grid` at each cut-off."""
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {', '.join(bad)}; allowed: {', '.join(METHODS)}")
    opts = options or FitOptions()
    groups = near_duplicate_groups(curves)
    notes: list[str] = []
    priors = leave_one_source_out_priors(curves, notes) if opts.prior == "public" else None
    if isinstance(opts.prior, ShapePrior):
        seen = sorted(set(opts.prior.sources) & {source_of(c.name) for c in curves})
        notes.append(
            f"every curve scored with the given prior {opts.prior.version}"
            + (f"; it learned from {', '.join(seen)}, scored here: optimistic for those" if seen else "")
        )

    def options_for(c: Curve) -> FitOptions:
        if priors is None:
            return opts
        return FitOptions(**{**opts.__dict__, "prior": priors[source_of(c.name)]})

    families = grid_families(curves, directory)
    grid_fits: dict[tuple[str, float], CurveFit] = {}
    if "grid" in methods:
        members: dict[str, list[Curve]] = {}
        for c in curves:
            members.setdefault(families[c.name], []).append(c)
        for runs in members.values():
            if len(runs) < 2:
                continue
            for f in cutoffs:
                windows = []
                for c in runs:
                    cut = cut_at(c, f)
                    windows.append((c.x[c.x <= cut], c.y[c.x <= cut]))
                for c, fit in zip(runs, fit_grid(windows, options_for(runs[0])), strict=True):
                    grid_fits[(c.name, f)] = fit
    cases = [
        case
        for c in curves
        for f in cutoffs
        for case in backtest_curve(c, f, methods, options_for(c), grid_fits.get((c.name, f)), calibration)
    ]
    saturated = {c.name: c.frac90 < SATURATION_FRAC90 for c in curves}
    return Report(
        list(curves), cases, groups, saturated, tuple(cutoffs), tuple(methods), families=families, prior_notes=notes
    )


@dataclass(frozen=True)
class SummaryRow:
    subset: str
    cutoff: float
    method: str
    n_curves: int
    n_groups: int
    n_failed: int
    """Cases of this subset and cut-off that this method could not forecast (insufficient data, no fit)."""
    median_tail_mae: float | None
    median_last_error: float | None
    coverage: float | None
    """Share of held-out points inside the band, weighting each group equally."""


def summarize(report: Report) -> list[SummaryRow]:
    """Per subset ('informative', 'all'), cut-off and method: medians over near-duplicate groups (each group's
    value is the mean over its members), on the cases every method forecast."""
    rows: list[SummaryRow] = []
    by_key: dict[tuple[str, float], dict[str, Case]] = {}
    for case in report.cases:
        by_key.setdefault((case.curve, case.cutoff), {})[case.method] = case
    for subset in ("informative", "all"):
        for f in report.cutoffs:
            keys = [k for k in by_key if k[1] == f and (subset == "all" or not report.saturated[k[0]])]
            paired = [k for k in keys if all(by_key[k][m].tail_mae is not None for m in report.methods)]
            for m in report.methods:
                failed = sum(1 for k in keys if by_key[k][m].tail_mae is None and by_key[k][m].n_tail > 0)
                per_group: dict[str, list[Case]] = {}
                for k in paired:
                    per_group.setdefault(report.groups[k[0]], []).append(by_key[k][m])
                if not per_group:
                    rows.append(SummaryRow(subset, f, m, 0, 0, failed, None, None, None))
                    continue
                mae = [_mean(c.tail_mae for c in cs) for cs in per_group.values()]
                last = [_mean(c.last_error for c in cs) for cs in per_group.values()]
                covs = [_mean(c.coverage for c in cs) for cs in per_group.values()]
                cov_known = [v for v in covs if v is not None]
                rows.append(
                    SummaryRow(
                        subset,
                        f,
                        m,
                        len(paired),
                        len(per_group),
                        failed,
                        _median(mae),
                        _median(last),
                        float(np.mean(cov_known)) if cov_known else None,
                    )
                )
    return rows


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None
