"""Tried and not adopted (2026-11-26): forecasts from *related curves* of other studies, and averages of
forecasters, scored on every collection like ``bench/forecast_all.py`` (informative curves, paired cases, medians
over near-duplicate groups, flat priors).

    python bench/experiments/analog_ensembles.py [--curves ../shared/curves] [--only NAME ...]

Analog forecasts (the ifBO / "curves of related settings" idea, without a learned network): time is normalised to
τ = (x − x_first) / (x_cut − x_first), so every run is cut at τ = 1 and ends at τ = 1/f. A run's level at the cut is
read from its window (``last3``: the mean of its last 3 evaluations; ``loclin``: a line in ln τ over τ ∈ [0.5, 1]
evaluated at τ = 1), and the tail is forecast as that level plus the increments after their own cut of the runs of
every *other study* (a study: a public study's folder, the engine grids, or one source of shared/curves; a curve
never learns from its own study):

- ``level_*``: the level alone (a smoothed last value);
- ``drift_*``: plus the median increment over all other studies' runs;
- ``knnK_*``: plus the median increment over the K runs whose slope in ln τ before the cut is closest.

Averages (equal weights, point forecasts): of the per-run sigmoid (``fast``), the grid fit (``grid``), the power law
(``pl``) and the analog ``drift_loclin`` (``drift``).

Prints, per cut-off, each collection's median tail MAE per method and the geometric mean over the collections of
each method's ratio to the collection's best baseline (paper, power law, last value).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forecast_all import BASELINES, collections
from replay import add_corpus_args  # bench/replay.py

from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.backtest import Case, Report, cut_at, run_backtest, summarize
from rl_core.scaling.measure.corpus import Curve, load_curves, source_of

EPS = 1e-12
AVERAGES = {
    "fast+pl": ("fast", "pl"),
    "grid+pl": ("grid", "pl"),
    "grid+pl+drift": ("grid", "pl", "drift"),
    "fast+pl+drift": ("fast", "pl", "drift"),
    "pl+drift": ("pl", "drift"),
    "fast+grid+pl+drift": ("fast", "grid", "pl", "drift"),
}
ANALOGS = ("level_last3", "level_loclin", "drift_last3", "drift_loclin", "knn10_loclin", "knn25_loclin")


def tau(c: Curve, f: float) -> FloatArray:
    return (c.x - c.x[0]) / (cut_at(c, f) - c.x[0])


def _line_in_log_tau(t: FloatArray, y: FloatArray) -> tuple[float, float] | None:
    k = (t <= 1 + EPS) & (t >= 0.5) & (t > 0)
    if k.sum() < 3:
        return None
    design = np.vstack([np.ones(int(k.sum())), np.log(t[k])]).T
    coef, *_ = np.linalg.lstsq(design, y[k], rcond=None)
    return float(coef[0]), float(coef[1])


def level(t: FloatArray, y: FloatArray, how: str) -> float:
    window = y[t <= 1 + EPS]
    line = _line_in_log_tau(t, y) if how == "loclin" else None
    return line[0] if line is not None else float(np.mean(window[-3:]))


def slope(t: FloatArray, y: FloatArray) -> float:
    line = _line_in_log_tau(t, y)
    return line[1] if line is not None else float("nan")


class Library:
    """The curves of every collection, each tagged with its study; exact copies (a run plotted in several
    ablations) are kept once."""

    def __init__(self, tagged: list[tuple[str, Curve]]) -> None:
        seen: set[bytes] = set()
        self.curves: list[tuple[str, Curve]] = []
        for study, c in tagged:
            key = c.x.tobytes() + c.y.tobytes()
            if key not in seen:
                seen.add(key)
                self.curves.append((study, c))

    def forecast(self, target: Curve, study: str, f: float, method: str) -> FloatArray:
        kind, _, how = method.partition("_")
        t = tau(target, f)
        tail = t > 1 + EPS
        base = level(t, target.y, how)
        if kind == "level":
            return np.full(int(tail.sum()), base)
        increments, slopes = [], []
        for s, c in self.curves:
            if s == study:
                continue
            tc = tau(c, f)
            if (tc <= 1 + EPS).sum() < 4 or not (tc > 1 + EPS).any():
                continue
            increments.append(np.interp(t[tail], tc, c.y) - level(tc, c.y, how))
            slopes.append(slope(tc, c.y))
        inc, sl = np.array(increments), np.array(slopes)
        if kind.startswith("knn"):
            k = int(kind[3:])
            s_target = slope(t, target.y)
            ok = np.isfinite(sl)
            dist = np.abs(sl[ok] - s_target) if np.isfinite(s_target) else np.zeros(int(ok.sum()))
            inc = inc[ok][np.argsort(dist)[:k]]
        return base + np.median(inc, axis=0)


def study_of(collection: str, c: Curve) -> str:
    return f"shared:{source_of(c.name)}" if collection == "shared/curves" else collection


def point_forecasts(
    name: str, curves: list[Curve], families: dict[str, str], f: float, library: Library
) -> dict[str, dict[str, FloatArray]]:
    """Per curve: the tail's y and each component's point forecast at cut-off ``f`` (flat priors)."""
    opts = FitOptions(prior=None)
    members: dict[str, list[Curve]] = {}
    for c in curves:
        members.setdefault(families[c.name], []).append(c)
    grid: dict[str, object] = {}
    for runs in members.values():
        if len(runs) >= 2:
            windows = [(c.x[c.x <= cut_at(c, f)], c.y[c.x <= cut_at(c, f)]) for c in runs]
            grid.update({c.name: fit for c, fit in zip(runs, fit_grid(windows, opts), strict=True)})
    out = {}
    for c in curves:
        m = c.x <= cut_at(c, f)
        xs, ys, xt = c.x[m], c.y[m], c.x[~m]
        if xt.size == 0:
            continue
        fit = fit_curve(xs, ys, opts, intervals=False)
        d: dict[str, FloatArray] = {"y": c.y[~m]}
        if fit.params is not None:
            d["fast"] = fit.params(xt)
        if fit.power_law is not None:
            d["pl"] = fit.power_law(xt)
        g = grid.get(c.name, fit)
        if getattr(g, "params", None) is not None:
            d["grid"] = g.params(xt)  # type: ignore[union-attr]
        if xs.size >= 4:
            d["drift"] = library.forecast(c, study_of(name, c), f, "drift_loclin")
        out[c.name] = d
    return out


def _analog(library: Library, collection: str, f: float, method: str) -> Callable[[Curve], FloatArray | None]:
    def predict(c: Curve) -> FloatArray | None:
        if (c.x <= cut_at(c, f)).sum() < 4:
            return None
        return library.forecast(c, study_of(collection, c), f, method)

    return predict


def _average(preds: dict[str, dict[str, FloatArray]], parts: tuple[str, ...]) -> Callable[[Curve], FloatArray | None]:
    def predict(c: Curve) -> FloatArray | None:
        d = preds.get(c.name)
        if d is None or not all(p in d for p in parts):
            return None
        return np.asarray(np.mean([d[p] for p in parts], axis=0), dtype=np.float64)

    return predict


def extra_cases(curves: list[Curve], f: float, methods: dict[str, Callable[[Curve], FloatArray | None]]) -> list[Case]:
    cases = []
    for c in curves:
        yt = c.y[c.x > cut_at(c, f)]
        for method, predict in methods.items():
            p = predict(c) if yt.size else None
            if p is None:
                cases.append(Case(c.name, f, method, 0, int(yt.size), None, None, None, "no forecast"))
                continue
            err = np.abs(p - yt)
            cases.append(Case(c.name, f, method, 0, int(yt.size), float(err.mean()), float(err[-1]), None, "ok"))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--only", action="append")
    args = ap.parse_args()
    chosen = [c for c in collections(args.curves, args.engine, args.public) if not args.only or c.name in args.only]
    loaded = {c.name: (c, load_curves(c.directory, c.x, c.y)[0]) for c in chosen}
    library = Library([(study_of(n, cv), cv) for n, (_, cs) in loaded.items() for cv in cs])
    cutoffs = (0.3, 0.5)
    base_methods = ("fast", "grid", "paper", "power_law", "last_value")
    results: dict[tuple[str, float, str], float | None] = {}
    for name, (coll, curves) in loaded.items():
        report = run_backtest(curves, cutoffs, base_methods, FitOptions(prior=None), directory=coll.directory)
        cases = list(report.cases)
        for f in cutoffs:
            preds = point_forecasts(name, curves, report.families, f, library)
            methods: dict[str, Callable[[Curve], FloatArray | None]] = {
                a: _analog(library, name, f, a) for a in ANALOGS
            }
            methods.update({avg: _average(preds, parts) for avg, parts in AVERAGES.items()})
            cases += extra_cases(curves, f, methods)
        every = base_methods + ANALOGS + tuple(AVERAGES)
        full = Report(report.curves, cases, report.groups, report.saturated, cutoffs, every, families=report.families)
        for r in summarize(full):
            if r.subset == "informative":
                results[(name, r.cutoff, r.method)] = r.median_tail_mae
        print(f"# {name} done", flush=True)
    every = base_methods + ANALOGS + tuple(AVERAGES)
    for f in cutoffs:
        print(f"\ncut-off {f:g}, informative curves, median tail MAE")
        print("collection".ljust(16) + "".join(m[:14].rjust(15) for m in every))
        logs: dict[str, list[float]] = {m: [] for m in every}
        for name in loaded:
            mae = {m: results.get((name, f, m)) for m in every}
            if any(v is None for v in mae.values()):
                continue
            best = min(mae[m] for m in BASELINES)  # type: ignore[type-var]
            for m in every:
                logs[m].append(float(np.log(mae[m] / best)))  # type: ignore[operator]
            print(name[:15].ljust(16) + "".join(f"{mae[m]:.4f}".rjust(15) for m in every))
        print("gm / best base".ljust(16) + "".join(f"{np.exp(np.mean(logs[m])):.3f}".rjust(15) for m in every))
        print("collections won".ljust(16) + "".join(str(sum(v < 0 for v in logs[m])).rjust(15) for m in every))


if __name__ == "__main__":
    main()
