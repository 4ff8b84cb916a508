"""Corrections of the grid forecast's point forecast, and choices between it and the power law: measured, not
adopted (docs/forecasting.md).

    .venv/bin/python bench/experiments/forecast_corrections.py ../shared/curves
    .venv/bin/python bench/experiments/forecast_corrections.py tests/fixtures/engine_grids train_flops pass_rate

Scored like ``scalerl backtest DIR --grids`` (leave-one-source-out shape priors, grid families fitted jointly, median
tail MAE over near-duplicate groups), for:

- ``grid``: the grid forecast (the sigmoid), as the backtest scores it;
- ``avg``: the mean of the grid forecast and the power law fitted on the same window;
- ``drift``: the grid forecast plus a learned drift ``d * ln(C / compute seen)`` past the data, ``d`` the median
  (over near-duplicate groups) least-squares slope of the tail residuals per e-fold of the *other* sources' curves,
  each forecast per run at the prior's cut-offs 0.2-0.7 (the point-forecast analogue of the band's extrapolation
  error);
- ``pl``: the power law alone;
- ``select``: per forecast, whichever of the two has the smaller in-window sum of squared residuals;
- ``evidence``: their average weighted by a BIC approximation of each model's evidence on the window (both have three
  free parameters, so the weight of the sigmoid is 1 / (1 + (SSE_sigmoid / SSE_power_law)^(n/2))).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import rl_core.scaling.measure.backtest as bt
import rl_core.scaling.measure.corpus as cp
from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.prior import ShapePrior
from rl_core.scaling.fit.prior_learn import LEARN_CUTOFFS


def _tail_slope(c: cp.Curve, prior: ShapePrior | None, f: float) -> float | None:
    cut = c.x[0] + f * (c.x[-1] - c.x[0])
    fit = fit_curve(c.x[c.x <= cut], c.y[c.x <= cut], FitOptions(prior=prior, intervals=False, power_law=False))
    tail = c.x > cut
    if fit.params is None or not tail.any() or fit.compute_max <= 0:
        return None
    e = np.log(c.x[tail] / fit.compute_max)
    r = c.y[tail] - fit.params(c.x[tail])
    return float(np.sum(r * e) / np.sum(e * e))


def main() -> None:
    directory = sys.argv[1]
    x_col = sys.argv[2] if len(sys.argv) > 2 else None
    y_col = sys.argv[3] if len(sys.argv) > 3 else None
    curves, _ = cp.load_curves(directory, x_col, y_col)
    groups = cp.near_duplicate_groups(curves)
    priors = bt.leave_one_source_out_priors(curves, [])
    families = bt.grid_families(curves, directory)
    saturated = {c.name: c.frac90 < bt.SATURATION_FRAC90 for c in curves}
    drift = {}
    for source in sorted({cp.source_of(c.name) for c in curves}):
        per_group: dict[str, list[float]] = {}
        for c in curves:
            if cp.source_of(c.name) == source:
                continue
            for f in LEARN_CUTOFFS:
                slope = _tail_slope(c, priors[source], f)
                if slope is not None:
                    per_group.setdefault(groups[c.name], []).append(slope)
        drift[source] = float(np.median([np.mean(v) for v in per_group.values()])) if per_group else 0.0
    print("learned drift per e-fold:", {k: round(v, 4) for k, v in drift.items()})
    scores: dict[tuple[str, float], dict[str, float]] = {}
    members: dict[str, list[cp.Curve]] = {}
    for c in curves:
        members.setdefault(families[c.name], []).append(c)
    for f in (0.3, 0.5):
        for runs in members.values():
            windows = []
            for c in runs:
                cut = c.x[0] + f * (c.x[-1] - c.x[0])
                windows.append((c.x[c.x <= cut], c.y[c.x <= cut]))
            opts = FitOptions(prior=priors[cp.source_of(runs[0].name)], intervals=False)
            fits = fit_grid(windows, opts) if len(runs) > 1 else [fit_curve(*windows[0], opts)]
            for c, fit, (xs, _) in zip(runs, fits, windows, strict=True):
                tail = c.x > xs.max()
                if not tail.any() or fit.params is None or fit.power_law is None:
                    continue
                xt, yt = c.x[tail], c.y[tail]
                g, p = fit.params(xt), fit.power_law(xt)
                e = np.log(xt / fit.compute_max)
                corrected = np.clip(g + drift[cp.source_of(c.name)] * e, 0.0, 1.0)
                s_g, s_p, n = fit.sse, fit.power_law_sse, max(fit.n_points, 1)
                if s_g is None or s_p is None:
                    continue
                log_ratio = 0.5 * n * (np.log(max(s_g, 1e-300)) - np.log(max(s_p, 1e-300)))
                w_g = float(1.0 / (1.0 + np.exp(np.clip(log_ratio, -700, 700))))
                scores[(c.name, f)] = {
                    "grid": float(np.mean(np.abs(g - yt))),
                    "avg": float(np.mean(np.abs(0.5 * (g + p) - yt))),
                    "drift": float(np.mean(np.abs(corrected - yt))),
                    "pl": float(np.mean(np.abs(p - yt))),
                    "select": float(np.mean(np.abs((g if s_g <= s_p else p) - yt))),
                    "evidence": float(np.mean(np.abs(w_g * g + (1.0 - w_g) * p - yt))),
                }
    for f in (0.3, 0.5):
        for subset in ("informative", "all"):
            keys = [k for k in scores if k[1] == f and (subset == "all" or not saturated[k[0]])]
            row = {}
            for m in ("grid", "avg", "drift", "pl", "select", "evidence"):
                per: dict[str, list[float]] = {}
                for k in keys:
                    per.setdefault(groups[k[0]], []).append(scores[k][m])
                row[m] = round(float(np.median([np.mean(v) for v in per.values()])), 4)
            print(f, subset, len(keys), row)


if __name__ == "__main__":
    main()
