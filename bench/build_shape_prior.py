"""Rebuild rl_core/scaling/fit/shape_prior.json, the forecaster's empirical shape prior (see fit/prior.py).

Run: .venv/bin/python bench/build_shape_prior.py --version YYYY-MM-DD.N [--curves ../shared/curves] [--scale 0.5]
Every CSV curve under the given directories is fitted (oracle fits at the cut-offs of prior_learn.LEARN_CUTOFFS);
the prior is the group-weighted Gaussian of their shapes, and its extrapolation error the smallest that makes the
80% predictive band cover 80% of those curves' held-out points (rl_core.scaling.measure.prior_build.build_prior, the
same function as `scalerl prior build`, which builds a prior from your own runs). Bump --version when the corpus or
the method changes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rl_core.scaling.fit.prior import PRIOR_FILE
from rl_core.scaling.fit.prior_learn import DEFAULT_SCALE
from rl_core.scaling.measure.corpus import load_curves
from rl_core.scaling.measure.prior_build import build_prior, write_prior

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curves", type=Path, nargs="+", default=[ROOT.parent / "shared" / "curves"])
    ap.add_argument("--scale", type=float, default=DEFAULT_SCALE)
    ap.add_argument("--version", required=True, help="e.g. 2026-11-23.1")
    ap.add_argument("--out", type=Path, default=PRIOR_FILE)
    args = ap.parse_args()
    curves = [c for d in args.curves for c in load_curves(d)[0]]
    prior = build_prior(
        curves, version=args.version, scale=args.scale, extra={"directories": [str(d) for d in args.curves]}
    )
    write_prior(prior, args.out)
    print(json.dumps(prior.to_json(), indent=2))


if __name__ == "__main__":
    main()
