"""Tried and not adopted (2026-11-29): choosing the sigmoid's weight in the calibrated forecast per curve.

    python bench/forecast_cases.py --cutoffs 0.2,0.3,0.4,0.5,0.6      # the cached cases (about 15 s)
    python bench/forecast_all.py --json bench/out/forecast_all.json  # optional: the paper's procedure as a baseline
    python bench/experiments/forecast_weighting.py [--curves ../shared/curves] [--baselines bench/out/forecast_all.json]

The shipped forecast centre is ``w * sigmoid + (1 - w) * power law`` with one weight when the ceiling is identified
and one when it is not (``rl_core.scaling.fit.calibration``). At 30% of a run it is more than 5% above the best
baseline on some collections whose best single form differs (the power law on shared/curves, the sigmoid on SPEED
MATH500), so two ways to pick the weight per curve were scored, each collection with weights learned without it
(the same objective as ``learn_weights``):

- ``shipped``: the two weights (the forecaster's default), learned leave one collection out;
- ``bend``: one weight per bin of how far past the fit's C_mid the window reaches (``ln(x_seen / C_mid)`` below
  -0.5, -0.5 to 0.5, above 0.5; and ceiling not identified), learned leave one collection out;
- ``prequential``: the window's first 60% (in compute) fitted again, its last 40% forecast by the sigmoid and the
  power law, and the weight ``e_pl / (e_sigmoid + e_pl)`` of those in-window errors (no learning; a curve whose
  window has under 6 points keeps the shipped weight);
- ``prequential+shipped``: the mean of the two weights.

Prints, per cut-off and fitter, each collection's median tail MAE ratio to its best baseline (power law, last value,
and the paper's procedure where ``--baselines`` gives it), the geometric mean and on how many collections the ratio
is above 1.05 (the goal at 0.3: none).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forecast_all import REPO, collections
from replay import add_corpus_args  # bench/replay.py

from rl_core.scaling.fit.calibration import ForecastCalibration
from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.measure.backtest import cut_at
from rl_core.scaling.measure.calibration_learn import (
    LEARN_CUTOFFS,
    TOLERANCE,
    WEIGHT_GRID,
    WeightBlock,
    group_median,
    learn_calibration,
    usable_cases,
    weight_blocks,
    weight_objective,
)
from rl_core.scaling.measure.corpus import load_curves
from rl_core.scaling.measure.forecast_cases import ForecastCase

CUTOFFS = (0.3, 0.5)
BEND_EDGES = (-0.5, 0.5)
SUB_WINDOW = 0.6
GRID = np.asarray(WEIGHT_GRID)


def prequential_errors(curves_dir: Path, x: str | None, y: str | None) -> dict[tuple[str, float], tuple[float, float]]:
    """(sigmoid, power law) MAE on the last 40% of each window, fitted on its first 60%."""
    curves, _ = load_curves(curves_dir, x, y)
    out: dict[tuple[str, float], tuple[float, float]] = {}
    for c in curves:
        for f in CUTOFFS:
            w = c.x <= cut_at(c, f)
            cx, cy = c.x[w], c.y[w]
            if cx.size < 6:
                continue
            head = cx <= cx[0] + SUB_WINDOW * (cx[-1] - cx[0])
            if head.sum() < 4 or head.all():
                continue
            fit = fit_curve(cx[head], cy[head], FitOptions(prior=None))
            if fit.samples is None or fit.power_law is None:
                continue
            sig = np.median(fit.samples.measurements(cx[~head]), axis=0)
            pl = np.clip(fit.power_law(cx[~head]), 0.0, 1.0)
            out[(c.name, f)] = (float(np.mean(np.abs(sig - cy[~head]))), float(np.mean(np.abs(pl - cy[~head]))))
    return out


def bend_bin(c: ForecastCase) -> int:
    if not c.identified or not (np.isfinite(c.c_mid) and c.c_mid > 0):
        return len(BEND_EDGES) + 1
    return int(np.searchsorted(BEND_EDGES, np.log(c.x_seen / c.c_mid)))


def learn_bend_weights(cases: Sequence[ForecastCase]) -> np.ndarray:
    """One weight per bend bin (coordinate descent on ``learn_weights``'s objective; three passes)."""
    blocks = weight_blocks([c for c in cases if any(abs(c.cutoff - f) < 1e-9 for f in LEARN_CUTOFFS)])
    bins = {id(b): np.array([bend_bin(c) for c in b.cases]) for b in blocks}
    idx = np.full(len(BEND_EDGES) + 2, GRID.size // 2)

    def column(table: np.ndarray) -> Callable[[WeightBlock], np.ndarray]:
        return lambda b: table[bins[id(b)]]

    for _ in range(3):
        for k in range(idx.size):
            tables = [np.where(np.arange(idx.size) == k, j, idx) for j in range(GRID.size)]
            idx[k] = int(np.argmin([weight_objective(blocks, column(t)) for t in tables]))
    return np.asarray(GRID[idx])


def _mae(c: ForecastCase, forecast: object) -> float:
    return float(np.mean(np.abs(np.asarray(forecast) - np.asarray(c.y))))


def _blend(c: ForecastCase, w: float) -> np.ndarray:
    return np.asarray(w * np.asarray(c.sigmoid) + (1.0 - w) * np.clip(np.asarray(c.power_law), 0.0, 1.0))


def weights(
    c: ForecastCase,
    cal: ForecastCalibration,
    bend: np.ndarray,
    preq: dict[tuple[str, float], tuple[float, float]],
) -> dict[str, float]:
    """The sigmoid's weight for case ``c`` under each variant (module docstring)."""
    shipped = cal.weight_identified if c.identified else cal.weight_unidentified
    e = preq.get((c.curve, c.cutoff))
    own = shipped if e is None or sum(e) <= 0 else e[1] / (e[0] + e[1])
    return {
        "shipped": shipped,
        "bend": float(bend[bend_bin(c)]),
        "prequential": own,
        "prequential+shipped": 0.5 * (own + shipped),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--cases", type=Path, default=REPO / "bench" / "out" / "forecast_cases.json")
    ap.add_argument("--baselines", type=Path, help="bench/forecast_all.py --json output (adds the paper's procedure)")
    args = ap.parse_args()
    if not args.cases.is_file():
        raise SystemExit(f"error: no cases at {args.cases}; run bench/forecast_cases.py first")
    data = json.loads(args.cases.read_text())
    cases = usable_cases([ForecastCase.from_json(k) for ks in data["collections"].values() for k in ks])
    paper: dict[tuple[str, float], float] = {}
    if args.baselines:
        for r in json.loads(args.baselines.read_text()):
            paper[(r["collection"], float(r["cutoff"]))] = float(r["mae"]["paper"])
    preq = {
        c.name: prequential_errors(c.directory, c.x, c.y) for c in collections(args.curves, args.engine, args.public)
    }
    names = sorted({c.collection for c in cases})
    variants = ("shipped", "bend", "prequential", "prequential+shipped")
    ratios: dict[tuple[float, str], dict[str, list[float]]] = {}
    for name in names:
        others = [c for c in cases if c.collection != name]
        cal = learn_calibration(others, f"loco-{name}")
        bend = learn_bend_weights(others)
        for f in CUTOFFS:
            for fitter in ("fast", "grid"):
                cs = [c for c in cases if c.collection == name and abs(c.cutoff - f) < 1e-9 and c.fitter == fitter]
                if not cs:
                    continue

                best = min(
                    group_median(cs, [_mae(c, np.clip(c.power_law, 0.0, 1.0)) for c in cs]),
                    group_median(cs, [_mae(c, c.last) for c in cs]),
                    paper.get((name, f), np.inf),
                )
                row = ratios.setdefault((f, fitter), {v: [] for v in variants})
                cells = []
                for v in variants:
                    r = group_median(cs, [_mae(c, _blend(c, weights(c, cal, bend, preq[name])[v])) for c in cs])
                    r /= best
                    row[v].append(r)
                    cells.append(f"{v} {r:.3f}")
                print(f"{name:22s} cut-off {f:g} {fitter:4s}  " + "  ".join(cells), flush=True)
    for (f, fitter), row in sorted(ratios.items()):
        parts = [
            f"{v} {np.exp(np.mean(np.log(rs))):.3f} (> {TOLERANCE:g}× on {sum(r > TOLERANCE for r in rs)} of {len(rs)})"
            for v, rs in row.items()
        ]
        print(f"cut-off {f:g} {fitter}: geometric mean over the collections: " + "; ".join(parts))


if __name__ == "__main__":
    main()
