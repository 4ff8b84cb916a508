"""Score forecaster variants quickly on real curves (leave-one-source-out for anything learned).

Run: .venv/bin/python bench/forecast_variants.py [--curves ../shared/curves] [--variants old,prior] [--samples 500]
Variants: old (flat priors), auto (R0 fitted for late starts), last, power, prior (learned prior, leave-one-source-out;
add "auto" for R0 auto, "mean" for the posterior-mean curve, "free" for a free start: burn-in drops C = 0 too and R0 is
fitted), each prior variant at every --scales value.
Prints the backtest's summary rows (medians over near-duplicate groups, informative and all curves) per variant.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.fit.prior import ShapePrior
from rl_core.scaling.fit.prior_learn import OracleShape, learn_prior, oracle_shapes
from rl_core.scaling.measure.backtest import Case, Report, summarize
from rl_core.scaling.measure.corpus import Curve, load_curves, near_duplicate_groups, source_of

Forecast = Callable[
    [Curve, float, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]
]


def _case(curve: Curve, cutoff: float, method: str, fc: Forecast) -> Case:
    cut = curve.x[0] + cutoff * (curve.x[-1] - curve.x[0])
    m = curve.x <= cut
    xs, ys, xt, yt = curve.x[m], curve.y[m], curve.x[~m], curve.y[~m]
    pred, lo, hi = fc(curve, cutoff, xs, ys, xt)
    if pred is None or xt.size == 0:
        return Case(curve.name, cutoff, method, int(xs.size), int(xt.size), None, None, None, "failed")
    err = np.abs(pred - yt)
    cov = None if lo is None or hi is None else float(np.mean((yt >= lo) & (yt <= hi)))
    return Case(curve.name, cutoff, method, int(xs.size), int(xt.size), float(err.mean()), float(err[-1]), cov, "ok")


def sigmoid_forecast(
    options: FitOptions, priors: dict[str, ShapePrior] | None = None, use_mean: bool = False, free_start: bool = False
) -> Forecast:
    """``free_start``: the burn-in also drops the points at zero compute and R0 is fitted (the lower asymptote is
    free, so the sigmoid can follow the slow creep after an early jump, as the power law does)."""

    def fc(curve: Curve, cutoff: float, xs: np.ndarray, ys: np.ndarray, xt: np.ndarray):  # type: ignore[no-untyped-def]
        opts = options
        if priors is not None:
            opts = FitOptions(**{**options.__dict__, "prior": priors[source_of(curve.name)]})
        if free_start:
            keep = xs >= 0.2 * xs.max()
            xs, ys = xs[keep], ys[keep]
            opts = FitOptions(**{**opts.__dict__, "r0": "fit", "burn_in": 0.0})
        fit = fit_curve(xs, ys, opts)
        if fit.params is None:
            return None, None, None
        if fit.samples is None:
            return fit.params(xt), None, None
        meas = fit.samples.measurements(xt)
        lo, hi = np.quantile(meas, [0.1, 0.9], axis=0)
        pred = fit.samples.curves(xt).mean(axis=0) if use_mean else fit.params(xt)
        return pred, lo, hi

    return fc


def power_law_forecast(xs_opts: FitOptions) -> Forecast:
    def fc(curve: Curve, cutoff: float, xs: np.ndarray, ys: np.ndarray, xt: np.ndarray):  # type: ignore[no-untyped-def]
        fit = fit_curve(xs, ys, xs_opts, intervals=False)
        if fit.power_law is None:
            return None, None, None
        return fit.power_law(xt), None, None

    return fc


def last_value(curve: Curve, cutoff: float, xs: np.ndarray, ys: np.ndarray, xt: np.ndarray):  # type: ignore[no-untyped-def]
    return np.full(xt.shape, ys[-1]), None, None


def loso_priors(curves: list[Curve], groups: dict[str, str], scale: float, r0: str) -> dict[str, ShapePrior]:
    shapes: dict[str, list[OracleShape]] = {c.name: oracle_shapes(c.name, c.x, c.y, r0=r0) for c in curves}
    sources = sorted({source_of(c.name) for c in curves})
    out = {}
    for s in sources:
        train = [sh for c in curves if source_of(c.name) != s for sh in shapes[c.name]]
        out[s] = learn_prior(train, groups, [source_of(c.name) for c in curves if source_of(c.name) != s], scale=scale)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--curves", type=Path, nargs="+", default=[Path("../shared/curves")])
    ap.add_argument("--variants", default="old,last,power,prior")
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--cutoffs", default="0.3,0.5")
    ap.add_argument("--scales", default="1")
    args = ap.parse_args()
    curves: list[Curve] = []
    for d in args.curves:
        curves += load_curves(d)[0]
    groups = near_duplicate_groups(curves)
    cutoffs = tuple(float(v) for v in args.cutoffs.split(","))
    base = FitOptions(n_samples=args.samples)
    variants: dict[str, Forecast] = {}
    for v in args.variants.split(","):
        if v == "old":
            variants[v] = sigmoid_forecast(base)
        elif v == "auto":
            variants[v] = sigmoid_forecast(FitOptions(n_samples=args.samples, r0="auto"))
        elif v == "last":
            variants[v] = last_value
        elif v == "power":
            variants[v] = power_law_forecast(base)
        elif v.startswith("prior"):
            r0 = "auto" if "auto" in v else "observed"
            for sc in args.scales.split(","):
                pri = loso_priors(curves, groups, float(sc), r0)
                opts = FitOptions(n_samples=args.samples, r0=r0)
                variants[f"{v}@{sc}"] = sigmoid_forecast(opts, pri, use_mean="mean" in v, free_start="free" in v)
        else:
            raise SystemExit(f"unknown variant {v}")
    cases = []
    for name, fc in variants.items():
        t = time.perf_counter()
        cases += [_case(c, f, name, fc) for c in curves for f in cutoffs]
        print(f"{name}: {time.perf_counter() - t:.1f}s", flush=True)
    saturated = {c.name: c.frac90 < 0.1 for c in curves}
    report = Report(curves, cases, groups, saturated, cutoffs, tuple(variants))
    for r in summarize(report):
        cov = "-" if r.coverage is None else f"{r.coverage:.2f}"
        print(
            f"{r.subset:12s} {r.cutoff:4.2f} {r.method:18s} n={r.n_curves:3d} g={r.n_groups:3d} fail={r.n_failed:2d} "
            f"mae={r.median_tail_mae:.4f} last={r.median_last_error:.4f} cov={cov}"
        )


if __name__ == "__main__":
    main()
