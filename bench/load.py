"""A bounded load test of the metrics path against a real server process on 127.0.0.1 (SQLite or PostgreSQL).

Seven "light" clients each post small batches (10 points with a pass rate) to a run of their own while one
"heavy" client posts to a run that already holds a long curve (so every request refits a long curve). It stops by
itself after ``--seconds`` or ``--max-requests`` (whichever comes first) and prints requests/s, p50/p95 latency and
errors per kind of client. Only 127.0.0.1 is ever contacted.

    .venv/bin/python bench/load.py --seconds 20 --heavy-points 200000
    .venv/bin/python bench/load.py --database postgresql://postgres@127.0.0.1:5432/test_load_db
"""

from __future__ import annotations

import argparse
import threading
import time

import httpx
from bench_server import bench_server


def _quantile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--database", default="", help="SQLAlchemy URL (default: SQLite in a temporary folder)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--max-requests", type=int, default=20_000)
    ap.add_argument("--light-clients", type=int, default=7)
    ap.add_argument("--heavy-points", type=int, default=200_000, help="points already stored on the heavy run")
    args = ap.parse_args()
    assert args.seconds <= 120 and args.max_requests <= 100_000, "bounded on purpose"

    with bench_server(args.database, prefix="scalerl-load-", interval_refit_min_seconds=30) as (base, token):
        h = {"Authorization": f"Bearer {token}"}
        api = httpx.Client(base_url=base, headers=h, timeout=60)
        runs = [
            api.post("/api/v1/runs", json={"name": f"load-{i}"}).json()["id"] for i in range(args.light_clients + 1)
        ]
        heavy = runs[-1]
        for start in range(0, args.heavy_points, 10_000):
            pts = [
                {"step": i, "compute": float(i + 1), "pass_rate": 0.2 + 0.5 * i / max(args.heavy_points, 1)}
                for i in range(start, min(start + 10_000, args.heavy_points))
            ]
            api.post(f"/api/v1/runs/{heavy}/metrics", json={"points": pts}).raise_for_status()

        lat: dict[str, list[float]] = {"light": [], "heavy": []}
        errors: dict[str, int] = {"light": 0, "heavy": 0}
        budget = threading.Semaphore(args.max_requests)
        stop = time.monotonic() + args.seconds
        lock = threading.Lock()

        def client(run_id: int, kind: str, first_step: int) -> None:
            step = first_step
            with httpx.Client(base_url=base, headers=h, timeout=60) as c:
                while time.monotonic() < stop and budget.acquire(blocking=False):
                    pts = [
                        {"step": step + k, "compute": float(step + k + 1), "pass_rate": 0.5, "metrics": {"loss": 1.0}}
                        for k in range(10)
                    ]
                    step += 10
                    t0 = time.perf_counter()
                    try:
                        ok = c.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts}).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    with lock:
                        lat[kind].append(time.perf_counter() - t0)
                        errors[kind] += 0 if ok else 1

        threads = [threading.Thread(target=client, args=(r, "light", 0)) for r in runs[:-1]]
        threads.append(threading.Thread(target=client, args=(heavy, "heavy", args.heavy_points)))
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        db = "postgresql" if args.database.startswith("postgres") else "sqlite"
        print(
            f"database={db} seconds={elapsed:.1f} light_clients={args.light_clients} heavy_points={args.heavy_points}"
        )
        print("| clients | requests | requests/s | p50 ms | p95 ms | errors |")
        print("|---|---|---|---|---|---|")
        for kind in ("light", "heavy"):
            xs = lat[kind]
            print(
                f"| {kind} | {len(xs)} | {len(xs) / elapsed:.1f} | {1000 * _quantile(xs, 0.5):.0f} | "
                f"{1000 * _quantile(xs, 0.95):.0f} | {errors[kind]} |"
            )


if __name__ == "__main__":
    main()
