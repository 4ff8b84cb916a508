"""The backtest with and without the posterior's autocorrelation tempering (docs/forecasting.md, "Uncertainty").

    .venv/bin/python bench/experiments/autocorrelation_ablation.py ../shared/curves
    .venv/bin/python bench/experiments/autocorrelation_ablation.py tests/fixtures/engine_grids --x train_flops \
        --y pass_rate --prior shipped

Scores ``fast``, ``grid`` and the power law as ``scalerl backtest --grids`` does (leave-one-source-out prior by
default; ``--prior shipped`` uses the shipped prior, as the engine-grid rows of the docs do), once with
``FitOptions(autocorrelation=True)`` (the default) and once with ``False``, and prints both summaries.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.fit.prior import load_prior
from rl_core.scaling.measure.backtest import run_backtest, summarize
from rl_core.scaling.measure.corpus import load_curves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("--x")
    ap.add_argument("--y")
    ap.add_argument("--prior", choices=("loso", "shipped"), default="loso")
    args = ap.parse_args()
    curves, _ = load_curves(args.directory, args.x, args.y)
    prior = load_prior() if args.prior == "shipped" else "default"
    print("| autocorrelation | subset | cut-off | method | median tail MAE | coverage (80%) |")
    print("|---|---|---|---|---|---|")
    for tempered in (True, False):
        options = FitOptions(autocorrelation=tempered, prior=prior)
        report = run_backtest(curves, methods=("fast", "grid", "power_law"), options=options, directory=args.directory)
        for row in summarize(report):
            cov = "–" if row.coverage is None else f"{row.coverage:.2f}"
            mae = "–" if row.median_tail_mae is None else f"{row.median_tail_mae:.4f}"
            print(f"| {'on' if tempered else 'off'} | {row.subset} | {row.cutoff} | {row.method} | {mae} | {cov} |")


if __name__ == "__main__":
    main()
