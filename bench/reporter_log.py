"""What ``Reporter.log()`` costs the training loop, this tree beside another (``--baseline``: a checkout or
``git worktree`` of an earlier commit), side by side in one run: the price of writing every point to the run's
write-ahead folder before ``log()`` returns (``kill -9`` loses no point ``log()`` returned for).

    python bench/reporter_log.py [--points 20000] [--repeats 5] [--baseline /tmp/scalerl-before]

Each measurement runs in a fresh interpreter of its tree: a reporter whose client answers every batch at once
(an in-memory transport: no network, so what is measured is the loop's side), ``--points`` calls to ``log()`` with a
pass rate and two metrics, timed one by one; then ``finish()``. Reported per tree: the median and p99 of one call
(µs) and the calls per second, as the median over ``--repeats`` alternating runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, tempfile, time
import httpx
from scalerl.client import Client, Reporter

def answer(request):
    if request.url.path.endswith("/metrics"):
        n = len(json.loads(request.content)["points"])
        return httpx.Response(200, json={"run_id": 1, "accepted": n, "duplicates": 0, "rejected": [],
                                         "status": "running", "action": "continue", "fit": None})
    if request.url.path.endswith("/status"):
        return httpx.Response(200, json={"id": 1, "name": "b", "experiment_id": 1, "status": "succeeded",
                                         "action": "stop", "budget": None, "n_points": 0, "last_step": None,
                                         "compute_used": 0.0})
    return httpx.Response(200, json={"run_id": 1, "status": "running", "action": "continue"})

n = int(sys.argv[1])
client = Client("http://bench", "t", transport=httpx.MockTransport(answer))
with tempfile.TemporaryDirectory() as folder:
    rep = Reporter(client, run_id=1, flush_interval=0.05, offline_dir=folder, handle_signals=False)
    times = []
    clock = time.perf_counter
    for step in range(n):
        t0 = clock()
        rep.log(step, float(step), 0.5, loss=1.0 / (step + 1), reward=0.1)
        times.append(clock() - t0)
    rep.finish(timeout=30)
times.sort()
print(json.dumps({"median_us": times[n // 2] * 1e6, "p99_us": times[int(n * 0.99)] * 1e6,
                  "per_s": n / sum(times), "delivered": rep.delivered}))
"""


def measure(tree: Path, points: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(points)],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()},
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    if result["delivered"] != points:
        raise SystemExit(f"{tree}: {result['delivered']} of {points} points delivered")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", type=Path, help="another tree (e.g. git worktree add /tmp/before <commit>)")
    args = ap.parse_args()
    trees = {"this tree": REPO} | ({"baseline": args.baseline} if args.baseline else {})
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for _ in range(args.repeats):
        for label, tree in trees.items():  # alternating: drift on a shared machine hits both alike
            runs[label].append(measure(tree, args.points))
    print(f"# {date.today()} {platform.node()} {platform.processor() or platform.machine()}; {args.points} log() calls")
    print("| tree | median µs/call | p99 µs/call | calls/s |")
    print("|---|---|---|---|")
    for label, rows in runs.items():
        med = statistics.median(r["median_us"] for r in rows)
        p99 = statistics.median(r["p99_us"] for r in rows)
        rate = statistics.median(r["per_s"] for r in rows)
        print(f"| {label} | {med:.1f} | {p99:.1f} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
