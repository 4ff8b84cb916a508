"""How much finished history does a team prior need before it beats the shipped prior?

For each grid (sub-directory) of a study, the grid is forecast at each cut-off (per run, ``fast``, and jointly,
``grid``) with a prior learned from k of the *other* grids (k = 1, 2, ..., all; several random draws of which
grids), and with the shipped prior. The cases of every target grid are pooled and summarised as ``scalerl
backtest`` does (median tail MAE over near-duplicate groups; informative = not saturated early). This is what the
service's ``fit: {prior: team}`` does at submission: learn from the same stack's finished experiments.

    .venv/bin/python bench/team_prior_history.py tests/fixtures/public_grids/grpo_math1p5b \
        tests/fixtures/engine_grids --draws 4 [--x COL --y COL]

The engine grids need ``--x train_flops --y pass_rate``; a study is read with the columns its curves name by
default otherwise (the CLI's rule), so run one command per study when their columns differ.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from pathlib import Path

from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.fit.prior import ShapePrior, load_prior
from rl_core.scaling.measure.backtest import Report, run_backtest, summarize
from rl_core.scaling.measure.corpus import Curve, load_curves, near_duplicate_groups
from rl_core.scaling.measure.prior_build import PriorCorpus

METHODS = ("fast", "grid")
CUTOFFS = (0.3, 0.5)


def _grid_of(curve: Curve) -> str:
    return curve.name.rpartition("/")[0]


def _pooled(curves: list[Curve], reports: list[Report]) -> Report:
    """One report over every target grid's cases, grouped as the backtest groups the whole study."""
    first = reports[0]
    return Report(
        curves,
        [case for r in reports for case in r.cases],
        near_duplicate_groups(curves),
        {k: v for r in reports for k, v in r.saturated.items()},
        first.cutoffs,
        first.methods,
    )


def study(directory: Path, x: str | None, y: str | None, draws: int, seed: int) -> None:
    curves, _ = load_curves(directory, x, y)
    by_grid: dict[str, list[Curve]] = defaultdict(list)
    for c in curves:
        by_grid[_grid_of(c)].append(c)
    grids = sorted(by_grid)
    corpus = PriorCorpus(curves)
    rng = random.Random(seed)
    shipped = load_prior()
    # (label, draw) -> one report per target grid: a draw's cases pool over the targets (each case once)
    reports: dict[tuple[str, int], list[Report]] = defaultdict(list)
    runs_in_history: dict[str, list[int]] = defaultdict(list)
    for target in grids:
        others = [g for g in grids if g != target]
        for label, prior in (("shipped", shipped), ("flat", None)):
            reports[(label, 0)].append(_backtest(by_grid[target], prior, directory))
        sizes = sorted({1, 2, 4, len(others)} & set(range(1, len(others) + 1)))
        for k in sizes:
            n_draws = 1 if k == len(others) else draws
            for draw in range(n_draws):
                chosen = rng.sample(others, k)
                exclude = {f"engine-{g}" for g in grids if g not in chosen}
                if not corpus.has_shapes(exclude=exclude):
                    continue
                prior = corpus.prior(version=f"team-{k}", exclude=exclude)
                label = f"team, {k} grid{'s' if k > 1 else ''}" if k < len(others) else "team, all other grids"
                reports[(label, draw)].append(_backtest(by_grid[target], prior, directory))
                runs_in_history[label].append(sum(len(by_grid[g]) for g in chosen))
    started = time.perf_counter()
    PriorCorpus(curves).prior(version="timing")
    seconds = time.perf_counter() - started
    print(f"\n{directory} ({len(curves)} curves, {len(grids)} grids; draws per k: {draws})")
    print(f"learning one prior from all {len(curves)} curves: {seconds:.2f} s")
    print("| prior | runs learned from (mean) | subset | cut-off | method | median tail MAE | coverage |")
    print("|---|---|---|---|---|---|---|")
    # per label and row: the mean over draws of the pooled median (and of the coverage)
    rows: dict[str, dict[tuple[str, float, str], list[tuple[float, float | None]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for (label, _draw), rs in reports.items():
        for row in summarize(_pooled(curves, rs)):
            if row.method in METHODS and row.median_tail_mae is not None:
                rows[label][(row.subset, row.cutoff, row.method)].append((row.median_tail_mae, row.coverage))
    for label, by_row in rows.items():
        n_runs = runs_in_history.get(label)
        runs = f"{sum(n_runs) / len(n_runs):.1f}" if n_runs else "-"
        for (subset, cutoff, method), values in by_row.items():
            mae = sum(v for v, _ in values) / len(values)
            covs = [c for _, c in values if c is not None]
            cov = f"{sum(covs) / len(covs):.2f}" if covs else "-"
            print(f"| {label} | {runs} | {subset} | {cutoff} | {method} | {mae:.4f} | {cov} |")


def _backtest(curves: list[Curve], prior: ShapePrior | None, directory: Path) -> Report:
    return run_backtest(curves, CUTOFFS, METHODS, FitOptions(prior=prior), directory=directory)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directories", nargs="+", type=Path)
    ap.add_argument("--x")
    ap.add_argument("--y")
    ap.add_argument("--draws", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for d in args.directories:
        study(d, args.x, args.y, args.draws, args.seed)


if __name__ == "__main__":
    main()
