"""Reads under ingest load: the experiment page's requests while 100 live runs post evaluations.

One experiment of ``--runs`` runs (a grid document); ``--writers`` threads post 10-point batches, each carrying a
pass rate, to the runs in turn; one reader requests the page's answers (the verdict, the chart, the comparison)
round-robin and records each latency. Bounded: it stops after ``--seconds``. Only 127.0.0.1 is contacted.

``--baseline-root DIR`` runs the same load, in the same invocation, against another checkout (e.g. a ``git
worktree`` of the commit before reads stopped fitting) and prints both side by side.

    .venv/bin/python bench/read_latency.py --seconds 60
    git worktree add /tmp/scalerl-before 6add338
    .venv/bin/python bench/read_latency.py --seconds 60 --baseline-root /tmp/scalerl-before
    .venv/bin/python bench/read_latency.py --database postgresql://postgres@127.0.0.1:5432/test_reads
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from bench_server import REPO, bench_server

READS = ("verdict", "chart", "comparison")


def _doc(n: int) -> dict[str, Any]:
    return {
        "name": "reads-under-load",
        "preset": "scalerl",
        "grid": {"batch.prompts": [8 + i for i in range(n)]},
        "seeds": [0],
        "task": "synthetic-addition",
        "model": "tiny",
        "budget": 10_000.0,
        "max_runs": max(n, 1),
    }


def _run_load(root: Path, database: str, args: argparse.Namespace) -> dict[str, Any]:
    with bench_server(database, prefix="scalerl-reads-", root=root, interval_refit_min_seconds=5) as (base, token):
        h = {"Authorization": f"Bearer {token}"}
        api = httpx.Client(base_url=base, headers=h, timeout=120)
        exp = api.post("/api/v1/experiments", json=_doc(args.runs), params={"runs_limit": 4096})
        exp.raise_for_status()
        body = exp.json()
        runs = [r["id"] for r in body["runs"]]
        rng = np.random.default_rng(0)
        ceilings = rng.uniform(0.4, 0.8, len(runs))
        steps = dict.fromkeys(runs, 0)
        stop = time.monotonic() + args.seconds
        lock = threading.Lock()
        posted, errors = [0], [0]
        lat: dict[str, list[float]] = {k: [] for k in READS}
        read_errors = [0]

        def writer(mine: list[int]) -> None:
            with httpx.Client(base_url=base, headers=h, timeout=120) as c:
                k = 0
                while time.monotonic() < stop:
                    run = mine[k % len(mine)]
                    k += 1
                    s0 = steps[run]
                    a = float(ceilings[runs.index(run)])
                    pts = []
                    for j in range(10):
                        step = s0 + j + 1
                        compute = 10.0 * step
                        y = 0.1 + (a - 0.1) / (1 + (2000.0 / compute) ** 1.5)
                        pts.append({"step": step, "compute": compute, "pass_rate": float(y + rng.normal(0, 0.01))})
                    steps[run] = s0 + 10
                    try:
                        ok = c.post(f"/api/v1/runs/{run}/metrics", json={"points": pts}).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    with lock:
                        posted[0] += 1
                        errors[0] += 0 if ok else 1

        def reader() -> None:
            paths = {
                "verdict": f"/api/v1/experiments/{body['id']}/verdict",
                "chart": f"/api/v1/dashboard/experiments/{body['id']}/chart",
                "comparison": f"/api/v1/dashboard/experiments/{body['id']}/comparison",
            }
            with httpx.Client(base_url=base, headers=h, timeout=120) as c:
                k = 0
                while time.monotonic() < stop:
                    name = READS[k % len(READS)]
                    k += 1
                    t0 = time.perf_counter()
                    try:
                        ok = c.get(paths[name]).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    lat[name].append(time.perf_counter() - t0)
                    read_errors[0] += 0 if ok else 1

        shares = [runs[i :: args.writers] for i in range(args.writers)]
        threads = [threading.Thread(target=writer, args=(s,)) for s in shares if s]
        threads.append(threading.Thread(target=reader))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"lat": lat, "posts": posted[0], "post_errors": errors[0], "read_errors": read_errors[0]}


def _row(label: str, out: dict[str, Any], seconds: float) -> str:
    cells = []
    for name in READS:
        xs = np.array(out["lat"][name]) * 1000
        cells.append(
            f"{name} p50/p95 {np.percentile(xs, 50):.0f}/{np.percentile(xs, 95):.0f} ms (n={xs.size})"
            if xs.size
            else f"{name} -"
        )
    rate = out["posts"] / seconds
    return f"| {label} | {' | '.join(cells)} | {rate:.1f} POST/s | {out['post_errors']} / {out['read_errors']} errors |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--database", default="", help="SQLAlchemy URL (default: SQLite in a temporary folder)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--baseline-root", type=Path, default=None, help="another checkout, run side by side")
    args = ap.parse_args()
    assert args.seconds <= 300 and args.runs <= 1000 and args.writers <= 32, "bounded on purpose"
    rows = []
    if args.baseline_root is not None:
        rows.append(
            _row(f"baseline ({args.baseline_root})", _run_load(args.baseline_root, args.database, args), args.seconds)
        )
    rows.append(_row("this checkout", _run_load(REPO, args.database, args), args.seconds))
    print(f"{args.runs} live runs, {args.writers} writers, {args.seconds:g} s, {args.database or 'SQLite'}")
    print("| server | " + " | ".join(READS) + " | ingest | POST / read errors |")
    print("|---|" + "---|" * (len(READS) + 2))
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
