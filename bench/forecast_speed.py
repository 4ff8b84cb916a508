"""Forecaster speed, measured side by side in one run (numbers for docs/benchmarks.md).

1. ``fast`` vs ``paper`` point fits on the same points: every CSV curve in --curves (first half of each curve, as
   in the backtest), the paper's grid carried to each curve's units. Reports each curve's time ratio and SSEs.
2. Full fit with 80% intervals vs point fit, on 100-point synthetic curves: median times and their ratio.
3. fit_grid on a grid of 16 runs x 100 points.

Run: .venv/bin/python bench/forecast_speed.py [--curves ../shared/curves] [--repeats 15]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from bench_timing import median_seconds

from rl_core.scaling.fit.calibration import forecast_summary
from rl_core.scaling.fit.fit_paper import PaperGrid
from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.measure.corpus import load_curves


def fast_vs_paper(curves_dir: Path, repeats: int) -> list[tuple[str, int, float, float, float, float]]:
    rows = []
    curves, _ = load_curves(curves_dir)
    for c in curves:
        cut = c.x[0] + 0.5 * (c.x[-1] - c.x[0])
        x, y = c.x[c.x <= cut], c.y[c.x <= cut]
        opts = FitOptions(intervals=False, power_law=False, prior=None)  # least squares: the SSE claim
        grid = PaperGrid.scaled_to(x[x > 0], y)
        t = time.perf_counter()
        paper = fit_curve(x, y, opts, method="paper", paper_grid=grid)
        t_paper = time.perf_counter() - t
        fast = fit_curve(x, y, opts)
        t_fast = median_seconds(lambda: fit_curve(x, y, opts), repeats)  # noqa: B023
        if paper.sse is None or fast.sse is None:
            continue
        rows.append((c.name, int(x.size), t_paper, t_fast, paper.sse, fast.sse))
    return rows


def intervals_cost(n_curves: int, n_points: int) -> tuple[list[float], list[float], list[float]]:
    """(fit with intervals, point fit, the calibrated forecast's value and band at the budget) CPU seconds."""
    full, point, summary = [], [], []
    rng = np.random.default_rng(0)
    for i in range(n_curves):
        x = np.linspace(10, 1000, n_points)
        y = sigmoid(x, 0.05, rng.uniform(0.4, 0.9), rng.uniform(1, 3), rng.uniform(100, 800))
        y = np.clip(y + rng.normal(0, 0.01, n_points), 0, 1)
        fit_curve(x, y)  # warm caches for this shape
        t = time.process_time()
        fit = fit_curve(x, y, seed=i)
        full.append(time.process_time() - t)
        t = time.process_time()
        forecast_summary(fit, np.array([2000.0]), "curve")
        summary.append(time.process_time() - t)
        t = time.process_time()
        fit_curve(x, y, intervals=False, power_law=False)
        point.append(time.process_time() - t)
    return full, point, summary


def grid_cost(repeats: int) -> list[float]:
    """fit_grid on 16 runs x 100 points (CPU time of this process: the VM is shared)."""
    rng = np.random.default_rng(1)
    x = np.linspace(10, 1000, 100)
    runs = []
    for _ in range(16):
        y = sigmoid(x, 0.05, rng.uniform(0.5, 0.7), rng.uniform(1.5, 2.5), rng.uniform(200, 400))
        runs.append((x, np.clip(y + rng.normal(0, 0.01, 100), 0, 1)))
    fit_grid(runs)
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fit_grid(runs)
        times.append(time.process_time() - t)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curves", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "curves")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--synthetic", type=int, default=100, help="number of 100-point curves for part 2")
    args = ap.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, python {platform.python_version()}")

    rows = fast_vs_paper(args.curves, args.repeats)
    ratios = [p / f for _, _, p, f, _, _ in rows]
    not_worse = sum(1 for *_, ps, fs in rows if fs <= ps * (1 + 1e-9) + 1e-12)
    print(f"\n1. fast vs paper point fits on {len(rows)} curves ({args.curves})")
    print(f"{'curve':52s} {'n':>4s} {'paper s':>8s} {'fast ms':>8s} {'ratio':>7s} {'SSE paper':>10s} {'SSE fast':>10s}")
    for name, n, tp, tf, ps, fs in rows:
        print(f"{name[:52]:52s} {n:4d} {tp:8.3f} {tf * 1e3:8.2f} {tp / tf:7.0f} {ps:10.3g} {fs:10.3g}")

    full, point, summary = intervals_cost(args.synthetic, 100)
    print("\nsummary")
    print(
        f"  fast/paper speed ratio: median {statistics.median(ratios):.0f}x, min {min(ratios):.0f}x "
        f"over {len(rows)} curves"
    )
    print(f"  fast SSE <= paper SSE on {not_worse}/{len(rows)} curves")
    print(f"  100 points, point fit:            median {statistics.median(point) * 1e3:.2f} ms")
    print(
        f"  100 points, fit + 80% intervals:  median {statistics.median(full) * 1e3:.2f} ms, "
        f"p95 {np.percentile(full, 95) * 1e3:.2f} ms (goal < 5 ms median)"
    )
    print(f"  intervals cost: {statistics.median(full) / statistics.median(point):.1f}x the point fit")
    print(f"  the calibrated value and band at the budget: median {statistics.median(summary) * 1e3:.2f} ms")
    grid = grid_cost(max(3, args.repeats // 3))
    print(f"  grid of 16 runs x 100 points (fit_grid): median {statistics.median(grid) * 1e3:.1f} ms (goal < 100 ms)")
    print("  (times of parts 2-3 are CPU time of this process: other jobs share the VM)")


if __name__ == "__main__":
    main()
