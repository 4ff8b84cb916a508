"""Backtest over several corpora at once, leave-one-source-out across all of them (needs shape_mixture.patch).

    .venv/bin/python bench/experiments/joint_backtest.py ../shared/curves,tests/fixtures/engine_grids 1   # one Gaussian
    .venv/bin/python bench/experiments/joint_backtest.py ../shared/curves,tests/fixtures/engine_grids 2   # mixture
    .venv/bin/python bench/experiments/joint_backtest.py ../shared/curves 2                              # public only

Prints the summary rows separately for the top-level (public) curves and the sub-directory (engine) curves.
About 5 minutes for the public curves, 9 for both, on the 2-core VM.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import rl_core.scaling.backtest as bt

# The patch applies to 04ce63a, where load_curves lived in backtest.py (it moved to corpus.py later).
load_curves = getattr(bt, "load_curves", None)
if load_curves is None:
    from rl_core.scaling.corpus import load_curves


def main() -> None:
    dirs, components = sys.argv[1].split(","), int(sys.argv[2])
    curves = [c for d in dirs for c in load_curves(d)[0]]
    started = time.time()
    methods = ("fast", "paper", "power_law", "last_value", "grid")
    report = bt.run_backtest(curves, methods=methods, prior_components=components)  # type: ignore[call-arg]
    for note in report.prior_notes:
        print(note)
    for label, keep in (("public", lambda n: "/" not in n), ("engine", lambda n: "/" in n)):
        sub = bt.Report(
            [c for c in report.curves if keep(c.name)],
            [k for k in report.cases if keep(k.curve)],
            report.groups,
            report.saturated,
            report.cutoffs,
            report.methods,
            families=report.families,
        )
        for r in bt.summarize(sub):
            mae = None if r.median_tail_mae is None else round(r.median_tail_mae, 4)
            cov = None if r.coverage is None else round(r.coverage, 2)
            print(label, r.subset, r.cutoff, r.method, r.n_curves, r.n_groups, mae, cov)
    print(f"{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
