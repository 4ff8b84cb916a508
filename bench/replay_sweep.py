"""The sweep behind scalerl's decision thresholds: every combination of hold, p_stop, value_margin and
min_expected_gain replayed on every grid (with a shape prior that never learned from the grid's source, as in
``bench/replay.py``), reported separately for the grids the defaults may be tuned on (``bench.replay.TUNED``) and
the held-out ones.

    python bench/replay_sweep.py

How the defaults were set (docs/decisions.md): ``hold`` = 2 is the stated rule (a stop must hold on consecutive
evaluations); ``p_stop`` = 0.9 and ``value_margin`` = 0.01 (about the evaluation noise) were fixed before any
replay; ``min_expected_gain`` was chosen on the tuned grids only, with those fixed.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.replay import REPO, TUNED, LeaveOneSourceOut, engine_grids, shared_grids
from rl_core.scaling import Policy
from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.measure.replay import ReplayResult, cached_fitter, load_grid, replay, scalerl_policy


def _stats(rs: list[ReplayResult]) -> str:
    compute, regret = np.mean([r.compute for r in rs]), np.mean([r.regret for r in rs])
    return f"{compute:.3f} / {regret:.4f} / {max(r.regret for r in rs):.4f}"


def main() -> None:
    curves = REPO.parent / "shared" / "curves"
    grids = shared_grids(curves) + engine_grids(REPO / "tests" / "fixtures" / "engine_grids")
    loaded = [(g.name, load_grid(list(g.files), g.x, g.y)) for g in grids]
    # the forecaster's shape prior never learned from the replayed grid's source, as in bench/replay.py
    loso = LeaveOneSourceOut([curves])
    fitters = {g.name: cached_fitter(FitOptions(prior=loso.prior_without(loso.sources_of(g.files)))) for g in grids}
    print("| hold | p_stop | value_margin | min_expected_gain | tuned: compute / regret / worst | held out: same |")
    print("|---|---|---|---|---|---|")
    for hold, p, m, eg in itertools.product((1, 2), (0.8, 0.9, 0.95), (0.005, 0.01, 0.02), (0.001, 0.002, 0.004)):
        policy = Policy(hold=hold, p_stop=p, value_margin=m, min_expected_gain=eg)
        res = {name: replay("s", runs, scalerl_policy(policy, fitters[name])) for name, runs in loaded}
        tuned = [r for name, r in res.items() if name in TUNED]
        held = [r for name, r in res.items() if name not in TUNED]
        print(f"| {hold} | {p} | {m} | {eg} | {_stats(tuned)} | {_stats(held)} |", flush=True)


if __name__ == "__main__":
    main()
