"""How low can a forecast's tail error go? The backtest next to two floors no forecast made at the cut-off can beat.

    .venv/bin/python bench/backtest_floor.py ../shared/curves
    .venv/bin/python bench/backtest_floor.py tests/fixtures/engine_grids --x train_flops --y pass_rate
    .venv/bin/python bench/backtest_floor.py tests/fixtures/public_grids/speed_rl_math500 --x time_s --y pass_rate

Runs the backtest as ``scalerl backtest DIR --grids --methods fast,paper,power_law,last_value,grid --prior none``
does (flat priors, the default since session 14), and scores, on the same paired cases and with the same medians over
near-duplicate groups:

- ``noise floor``: the tail MAE of a forecast that knew each curve's true mean exactly, √(2/π)·σ, with σ, the
  evaluation noise, estimated from the whole curve's second differences (robust: 1.4826·MAD/√6; second
  differences cancel a locally linear trend). Independent Gaussian noise is assumed; no forecast can beat it on
  average.
- ``hindsight sigmoid`` / ``hindsight power law``: each form fitted to the *whole* curve, tail included, and
  scored on the tail: what the form could do if the early points pinned it down perfectly.

and prints the forecasting goal at the 0.3 cut-off (30% below the best of last value, power law and paper's fit)
beside them: where the goal sits below the noise floor, no forecaster can meet it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.measure.backtest import Report, cut_at, run_backtest
from rl_core.scaling.measure.corpus import Curve, load_curves

METHODS = ("fast", "grid", "paper", "power_law", "last_value")
BASELINES = ("paper", "power_law", "last_value")


def noise_sd(y: np.ndarray) -> float:
    """Evaluation noise from second differences (robust to outliers and to a locally linear trend)."""
    if y.size < 3:
        return float("nan")
    d2 = y[2:] - 2 * y[1:-1] + y[:-2]
    mad = float(np.median(np.abs(d2 - np.median(d2))))
    return 1.4826 * mad / math.sqrt(6.0)


def hindsight(c: Curve, cutoffs: tuple[float, ...]) -> dict[str, dict[float, float | None]]:
    """Tail MAE of the sigmoid and the power law fitted to the whole curve, per cut-off."""
    fit = fit_curve(c.x, c.y, FitOptions(), intervals=False)
    out: dict[str, dict[float, float | None]] = {"hindsight sigmoid": {}, "hindsight power law": {}}
    for f in cutoffs:
        t = c.x > cut_at(c, f)
        xt, yt = c.x[t], c.y[t]
        out["hindsight sigmoid"][f] = None if fit.params is None else float(np.mean(np.abs(fit.params(xt) - yt)))
        pl = fit.power_law
        out["hindsight power law"][f] = None if pl is None else float(np.mean(np.abs(pl(xt) - yt)))
    return out


def summarize_with_floors(report: Report) -> None:
    by_key: dict[tuple[str, float], dict[str, float | None]] = defaultdict(dict)
    for case in report.cases:
        by_key[(case.curve, case.cutoff)][case.method] = case.tail_mae
    extra = {c.name: hindsight(c, report.cutoffs) for c in report.curves}
    floor = {c.name: math.sqrt(2 / math.pi) * noise_sd(c.y) for c in report.curves}
    cols = [*METHODS, "hindsight sigmoid", "hindsight power law", "noise floor"]
    print("| subset | cut-off | groups | " + " | ".join(cols) + " | goal (0.7 × best baseline at 0.3; best at 0.5) |")
    print("|" + "---|" * (len(cols) + 4))
    for subset in ("informative", "all"):
        for f in report.cutoffs:
            groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            for (name, cut), maes in by_key.items():
                if cut != f or (subset == "informative" and report.saturated[name]):
                    continue
                if any(maes.get(m) is None for m in METHODS):
                    continue
                g = groups[report.groups[name]]
                for m in METHODS:
                    g[m].append(float(maes[m]))  # type: ignore[arg-type]
                for k, per_cut in extra[name].items():
                    v = per_cut[f]
                    if v is not None:
                        g[k].append(v)
                g["noise floor"].append(floor[name])
            if not groups:
                continue
            med = {
                k: float(np.median([np.mean(g[k]) for g in groups.values() if g[k]]))
                for k in cols
                if any(g[k] for g in groups.values())
            }
            best = min(med[b] for b in BASELINES)
            goal = 0.7 * best if f <= 0.3 else best
            cells = " | ".join(f"{med[k]:.4f}" if k in med else "–" for k in cols)
            print(f"| {subset} | {f:g} | {len(groups)} | {cells} | {goal:.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory", type=Path)
    ap.add_argument("--x")
    ap.add_argument("--y")
    args = ap.parse_args()
    curves, _ = load_curves(args.directory, args.x, args.y)
    report = run_backtest(curves, (0.3, 0.5), METHODS, FitOptions(prior=None), directory=args.directory)
    summarize_with_floors(report)


if __name__ == "__main__":
    main()
