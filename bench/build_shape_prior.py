"""Rebuild rl_core/scaling/shape_prior.json, the forecaster's empirical shape prior (see rl_core/scaling/prior.py).

Run: .venv/bin/python bench/build_shape_prior.py [--curves ../shared/curves tests/fixtures/engine_grids] [--scale 0.5]
Every CSV curve under the given directories is fitted (oracle fits at the cut-offs of prior_learn.LEARN_CUTOFFS);
the prior is the group-weighted Gaussian of their shapes, and its extrapolation error the smallest that makes the
80% predictive band cover 80% of those curves' held-out points (prior_learn.learn_extrapolation_sd).
Bump --version when the corpus or the method changes.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from rl_core.scaling.backtest import load_curves, near_duplicate_groups, source_of
from rl_core.scaling.prior import PRIOR_FILE
from rl_core.scaling.prior_learn import DEFAULT_SCALE, learn_extrapolation_sd, learn_prior, oracle_shapes

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curves", type=Path, nargs="+", default=[ROOT.parent / "shared" / "curves"])
    ap.add_argument("--scale", type=float, default=DEFAULT_SCALE)
    ap.add_argument("--version", required=True, help="e.g. 2026-11-23.1")
    ap.add_argument("--out", type=Path, default=PRIOR_FILE)
    args = ap.parse_args()
    curves = []
    for d in args.curves:
        found, _ = load_curves(d)
        curves += found
    groups = near_duplicate_groups(curves)
    shapes = [s for c in curves for s in oracle_shapes(c.name, c.x, c.y)]
    prior = learn_prior(shapes, groups, [source_of(c.name) for c in curves], scale=args.scale, version=args.version)
    sd = learn_extrapolation_sd([(c.name, c.x, c.y) for c in curves], prior, groups)
    prior = replace(prior, extrapolation_sd=sd)
    data = prior.to_json()
    data["extra"] = {"curves": len(curves), "directories": [str(d) for d in args.curves]}
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
