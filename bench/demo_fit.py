"""Fit the compute–performance sigmoid to the first half of a run's curve and check it on the second half.

Reads ``<run>/metrics.jsonl`` (the evaluation points: validation pass rate against training compute), fits
``rl_core.scaling.fit_curve`` on the points with compute <= half of the run's final compute, predicts every later
point, and reports the mean and maximum absolute error. Writes the plot (``scalerl.plotting.fit_figure_html``) and,
with ``--png``, a screenshot of it taken with headless Chromium.

Usage: ``python bench/demo_fit.py runs/demo --html docs/engine-demo-fit.html --png docs/engine-demo-fit.png``
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import numpy as np

from rl_core.contracts.points import read_points
from rl_core.scaling import fit_curve
from scalerl.cli.errors import write_output
from scalerl.plotting import fit_figure_html


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--axis", choices=["device_hours", "flops"], default="device_hours")
    parser.add_argument("--html", type=Path, default=None)
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args()
    points = [p for p in read_points(args.run / "metrics.jsonl") if p.pass_rate is not None]
    key = "compute/device_hours" if args.axis == "device_hours" else "compute/flops"
    x = np.array([p.metrics.get(key, p.compute) for p in points], dtype=float)
    y = np.array([p.pass_rate for p in points], dtype=float)
    half = float(x.max()) / 2
    fit = fit_curve(x, y, fit_until=half)
    print(f"{len(points)} evaluation points; start {y[0]:.3f}, end {y[-1]:.3f}, best {y.max():.3f}")
    print(f"fit on compute <= {half:.4g} ({args.axis}): {fit.status}: {fit.message}")
    if fit.params is not None:
        print(f"  params: {fit.params}")
        later = x > half
        preds = np.array([p.mean for p in fit.predict(x[later])])
        err = np.abs(preds - y[later])
        tail = y[later]
        print(
            f"second half: {int(later.sum())} points, mean |error| {err.mean():.3f}, max |error| {err.max():.3f}, "
            f"|error| of the mean level {abs(preds.mean() - tail.mean()):.3f}"
        )
    if args.html is not None:
        label = "training device-hours" if args.axis == "device_hours" else "training FLOPs"
        html = fit_figure_html(
            x,
            y,
            fit,
            x[x > half],
            f"{args.run.name}: sigmoid fitted on the first half",
            label,
            "validation pass rate (mean@k)",
        )
        write_output(Path(args.html), html, "--html")
        print(f"wrote {args.html}")
        if args.png is not None:
            chromium = shutil.which("chromium") or shutil.which("chromium-browser")
            if chromium is None:
                raise SystemExit("chromium not found for --png")
            subprocess.run(
                [
                    chromium,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--hide-scrollbars",
                    "--window-size=1100,650",
                    "--virtual-time-budget=5000",
                    f"--screenshot={args.png.resolve()}",
                    args.html.resolve().as_uri(),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
            print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
