"""Cost of the compute-order check on the ingest hot path, side by side with the validation every point already gets.

    .venv/bin/python bench/compute_order.py [--points 10000] [--repeats 20]

An appending batch (the usual case: steps after the run's last stored step) is checked without a query
(:func:`server.intake.compute_order.order_violations`). This times that check and, in the same process on the same
points,
the pydantic validation of the batch's JSON body that ``POST /runs/{id}/metrics`` does first; it prints both medians
and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_timing import median_seconds
from pydantic import TypeAdapter

from server.intake.compute_order import order_violations
from server.intake.schemas import MetricPoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    first = 1000
    body = json.dumps(
        [
            {"step": s, "compute": 0.5 * s, "pass_rate": 0.3 if s % 10 == 0 else None, "metrics": {"loss": 1.0}}
            for s in range(first, first + args.points)
        ]
    )
    adapter = TypeAdapter(list[MetricPoint])
    points = adapter.validate_json(body)
    run = SimpleNamespace(id=1, last_step=first - 1, compute_used=0.5 * (first - 1))
    validate = 1e3 * median_seconds(lambda: adapter.validate_json(body), args.repeats)
    check = 1e3 * median_seconds(lambda: order_violations(None, run, points, True), args.repeats)  # type: ignore[arg-type]
    print("| points | validation (ms) | compute-order check (ms) | check / validation |")
    print("|---|---|---|---|")
    print(f"| {args.points} | {validate:.2f} | {check:.2f} | {check / validate:.2f} |")


if __name__ == "__main__":
    main()
