"""Fit every collection once and cache its forecast cases (:mod:`rl_core.scaling.measure.forecast_cases`).

    python bench/forecast_cases.py [--out bench/out/forecast_cases.json] [--cutoffs 0.3,0.5] [--jobs 2] [--only NAME]

The cache is what ``bench/build_forecast_calibration.py`` learns the calibration from and scores it on, leave one
collection out. Collections as ``bench/forecast_all.py`` forms them (flat priors, the forecaster's default).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forecast_all import REPO, Collection, collections
from replay import add_corpus_args  # bench/replay.py

from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.measure.corpus import load_curves
from rl_core.scaling.measure.forecast_cases import collect_cases

DEFAULT_OUT = REPO / "bench" / "out" / "forecast_cases.json"


def _collect(args: tuple[Collection, tuple[float, ...]]) -> tuple[str, list[dict[str, object]], float]:
    c, cutoffs = args
    t0 = time.perf_counter()
    curves, _ = load_curves(c.directory, c.x, c.y)
    cases = collect_cases(c.name, curves, cutoffs, FitOptions(prior=None), directory=c.directory)
    return c.name, [k.to_json() for k in cases], time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(ap)
    ap.add_argument("--only", action="append")
    ap.add_argument("--cutoffs", default="0.3,0.5")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    cutoffs = tuple(float(v) for v in args.cutoffs.split(","))
    chosen = [c for c in collections(args.curves, args.engine, args.public) if not args.only or c.name in args.only]
    if not chosen:
        raise SystemExit("error: no collection to fit (check --curves, --engine, --public and --only)")
    out: dict[str, list[dict[str, object]]] = {}
    with Pool(max(1, args.jobs)) as pool:
        for name, cases, seconds in pool.imap_unordered(_collect, [(c, cutoffs) for c in chosen]):
            out[name] = cases
            print(f"# {name}: {len(cases)} cases in {seconds:.0f} s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cutoffs": cutoffs, "collections": out}))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
