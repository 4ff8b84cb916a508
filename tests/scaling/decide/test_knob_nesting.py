"""The knob's invariant that holds decision by decision: on the same evaluations, a lower ``compute_target`` never
keeps a run that a higher one stops (the stop sets are nested from target 0.05 to 1, through the rules alone at
0.5). Whether a whole replay spends monotonically is measured (``bench/replay_frontier.py``'s ``monotone`` line), not
assumed: a stop at one target changes what the grid sees next."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rl_core.scaling import GridRun, Policy, decide_grid
from rl_core.scaling.decide.grid_decisions import GridFitter
from rl_core.scaling.measure.replay import RunCurve, cached_fitter, load_grid

#: From the cheapest setting to the dearest; ``None`` (the rules alone) sits at 0.5.
TARGETS: tuple[float | None, ...] = (0.05, 0.1, 0.2, 0.3, 0.4, None, 0.6, 0.7, 0.8, 0.9, 1.0)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _recorded() -> list[tuple[str, list[Path], str, str]]:
    """Every ablation of the public studies committed as fixtures, and the engine's recorded grids: (name, files,
    x column, y column)."""
    out = []
    for manifest in sorted((FIXTURES / "public_grids").glob("*/ablations.json")):
        study = manifest.parent
        axes = json.loads((study / "study.json").read_text()) if (study / "study.json").is_file() else {}
        for name, members in json.loads(manifest.read_text()).items():
            if len(members) >= 2:
                files = [study / m for m in members]
                out.append((f"{study.name}-{name}", files, axes.get("x", "step"), axes.get("y", "pass_rate")))
    for folder in sorted((FIXTURES / "engine_grids").iterdir()):
        files = sorted(folder.glob("*.csv"))
        if len(files) >= 2:
            out.append((f"engine-{folder.name}", files, "train_flops", "pass_rate"))
    return out


RECORDED = _recorded()


def _synthetic(seed: int) -> tuple[list[RunCurve], float]:
    """3 to 9 saturating curves with different ceilings, rates and noise, and where in the budget they are."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 10))
    steps = int(rng.integers(20, 40))
    x = np.arange(1, steps + 1, dtype=np.float64) * 10.0
    runs = []
    for i in range(n):
        ceiling, rate, noise = rng.uniform(0.3, 0.9), rng.uniform(0.04, 0.3), rng.uniform(0.003, 0.03)
        y = 0.05 + (ceiling - 0.05) * (1 - np.exp(-rate * np.arange(steps))) + rng.normal(0, noise, steps)
        runs.append(RunCurve(f"s{seed}_r{i}", x, np.clip(y, 0.0, 1.0)))
    return runs, float(rng.uniform(0.08, 0.8))


def _state(runs: list[RunCurve], fraction: float) -> list[GridRun]:
    """Every run live at ``fraction`` of a budget all share (the last x every run reaches)."""
    budget = min(float(r.x[-1]) for r in runs)
    out = []
    for r in runs:
        keep = r.x <= fraction * budget
        out.append(GridRun(r.name, r.x[keep], r.y[keep], "live", budget))
    return out


def _stops(grid: list[GridRun], fitter: GridFitter, target: float | None) -> set[str]:
    recs = decide_grid(grid, Policy(compute_target=target), fitter=fitter)
    return {r.run_id for r in recs if r.action == "stop"}


def _assert_nested(grid: list[GridRun]) -> list[set[str]]:
    fitter = cached_fitter()  # one fit per state, shared by every target
    sets = [_stops(grid, fitter, t) for t in TARGETS]
    for k in range(len(TARGETS) - 1):
        lower, higher = sets[k], sets[k + 1]
        assert higher <= lower, f"target {TARGETS[k + 1]} stops {sorted(higher - lower)}, which {TARGETS[k]} keeps"
    return sets


def test_on_random_grids_a_lower_target_stops_every_run_a_higher_one_stops() -> None:
    cheapest = dearest = 0
    for seed in range(10):
        runs, fraction = _synthetic(seed)
        sets = _assert_nested(_state(runs, fraction))
        cheapest, dearest = cheapest + len(sets[0]), dearest + len(sets[-1])
    assert cheapest > dearest  # the knob moves: not every setting stops nothing


def test_every_recorded_grid_is_in_the_property() -> None:
    assert len(RECORDED) >= 40, [r[0] for r in RECORDED]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "files", "x", "y"), RECORDED, ids=[r[0] for r in RECORDED])
def test_on_recorded_grids_a_lower_target_stops_every_run_a_higher_one_stops(
    name: str, files: list[Path], x: str, y: str
) -> None:
    _assert_nested(_state(load_grid(files, x, y), 0.25))
