"""Backtesting forecasters on recorded curves: fit on the start of each curve, predict the rest.

For each curve and cut-off f, the fit window is x <= x_min + f (x_max - x_min) and the held-out tail is the
rest. Methods: ``fast`` and ``paper`` (the sigmoid fitters), ``power_law`` (fitted on the same window) and
``last_value`` (the last observed pass rate carried forward). Per case: tail MAE, absolute error at the last
point, and the share of held-out points inside the predictive band (``fast``: the posterior band at the chosen
level; ``paper``: the paper's own ±0.02 margin on A; the others have none).

Two properties of a collection of curves distort a plain average, so the summary corrects for them:
- near-duplicates (runs of one setting that differ only in system options) are grouped and count once;
- curves that saturate almost at once (90% of their gain within the first 10% of the x range) make every method
  look good; the headline rows use the informative curves only, and the all-curves rows are reported beside them.
Every summary row compares the methods on the same cases: a (curve, cut-off) enters only if every method
produced a forecast for it; the cases a method could not forecast are counted separately.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rl_core.scaling.curves_io import CurveFileError, read_curve_table
from rl_core.scaling.fit_paper import PaperGrid
from rl_core.scaling.forecast import CurveFit, FitOptions, fit_curve
from rl_core.scaling.model import FloatArray

METHODS = ("fast", "paper", "power_law", "last_value")
DEFAULT_CUTOFFS = (0.3, 0.5)
#: Curves sampled at the same steps whose pass rates differ by less than this on average are one setting.
DUPLICATE_TOLERANCE = 0.02
PAPER_MARGIN = 0.02
#: A curve that reaches 90% of its gain within this fraction of its x range saturates almost at once: it is a weak
#: test of extrapolation (the threshold of shared/curves/SOURCES.md) and is left out of the informative subset.
SATURATION_FRAC90 = 0.1


@dataclass(frozen=True)
class Curve:
    name: str
    x_column: str
    y_column: str
    steps: FloatArray
    x: FloatArray
    y: FloatArray

    @property
    def frac90(self) -> float:
        """Fraction of the x range after which the curve first reaches 90% of its total gain."""
        y0, y_end = self.y[0], float(np.mean(self.y[-3:]))
        gain = y_end - y0
        if abs(gain) < 1e-12:
            return 0.0
        reached = np.flatnonzero((self.y - y0) / gain >= 0.9)
        i = int(reached[0]) if reached.size else self.y.size - 1
        span = self.x[-1] - self.x[0]
        return float((self.x[i] - self.x[0]) / span) if span > 0 else 0.0


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


def load_curves(
    directory: str | Path, x_column: str | None = None, y_column: str | None = None
) -> tuple[list[Curve], list[str]]:
    """Every readable CSV in ``directory`` as a curve (sorted by x, non-finite rows dropped); unreadable ones are
    returned as messages."""
    curves: list[Curve] = []
    skipped: list[str] = []
    for path in sorted(Path(directory).glob("*.csv")):
        try:
            table = read_curve_table(path)
            xc = x_column or table.default_x()
            yc = y_column or table.default_y()
            x, y = table.column(xc), table.column(yc)
            steps = table.values[table.columns[0]]
        except CurveFileError as exc:
            skipped.append(str(exc))
            continue
        ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(steps)
        order = np.argsort(x[ok], kind="stable")
        if order.size < 6:
            skipped.append(f"{path.name}: fewer than 6 points")
            continue
        curves.append(Curve(path.stem, xc, yc, steps[ok][order], x[ok][order], y[ok][order]))
    return curves, skipped


def near_duplicate_groups(curves: Sequence[Curve], tolerance: float = DUPLICATE_TOLERANCE) -> dict[str, str]:
    """Union of curves with the same metric column sampled at the same steps and mean |Δy| < ``tolerance``.
    Each group is named after its first member (alphabetically)."""
    parent = {c.name: c.name for c in curves}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for i, a in enumerate(curves):
        for b in curves[i + 1 :]:
            if a.y_column != b.y_column or a.steps.shape != b.steps.shape or not np.array_equal(a.steps, b.steps):
                continue
            if float(np.mean(np.abs(a.y - b.y))) < tolerance:
                ra, rb = root(a.name), root(b.name)
                parent[max(ra, rb)] = min(ra, rb)
    return {c.name: root(c.name) for c in curves}


def _metrics(
    pred: FloatArray, lo: FloatArray | None, hi: FloatArray | None, y: FloatArray
) -> tuple[float, float, float | None]:
    err = np.abs(pred - y)
    cov = None if lo is None or hi is None else float(np.mean((y >= lo) & (y <= hi)))
    return float(np.mean(err)), float(err[-1]), cov


def backtest_curve(curve: Curve, cutoff: float, methods: Iterable[str], options: FitOptions) -> list[Case]:
    """All methods on one curve at one cut-off."""
    cut = curve.x[0] + cutoff * (curve.x[-1] - curve.x[0])
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
        if method in ("fast", "paper"):
            grid = PaperGrid.scaled_to(xs[xs > 0], ys) if method == "paper" else None
            fit = fit_curve(xs, ys, options, method=method, paper_grid=grid, intervals=method == "fast")
            fits[method] = fit
            if fit.params is None:
                out.append(none_case(method, fit.status))
                continue
            pred = fit.params(xt)
            if method == "fast":
                preds = fit.predict(xt)
                lo = np.array([p.lo for p in preds], dtype=np.float64)
                hi = np.array([p.hi for p in preds], dtype=np.float64)
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


def run_backtest(
    curves: Sequence[Curve],
    cutoffs: Sequence[float] = DEFAULT_CUTOFFS,
    methods: Sequence[str] = METHODS,
    options: FitOptions | None = None,
) -> Report:
    """Backtest every method on every curve at every cut-off."""
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {', '.join(bad)}; allowed: {', '.join(METHODS)}")
    opts = options or FitOptions()
    cases = [case for c in curves for f in cutoffs for case in backtest_curve(c, f, methods, opts)]
    saturated = {c.name: c.frac90 < SATURATION_FRAC90 for c in curves}
    return Report(list(curves), cases, near_duplicate_groups(curves), saturated, tuple(cutoffs), tuple(methods))


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
