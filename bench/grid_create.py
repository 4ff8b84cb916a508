"""Creating a 4,096-run experiment against a real server process on 127.0.0.1 (SQLite by default): how long the
POST takes, how big its answer is, and how long reading every run back through the paged runs listing takes.
Only 127.0.0.1 is ever contacted; the server runs in a temporary folder and is stopped at the end.

    .venv/bin/python bench/grid_create.py                     # 64 x 64 = 4,096 runs, SQLite
    .venv/bin/python bench/grid_create.py --database postgresql://postgres@127.0.0.1:5432/test_grid_db
"""

from __future__ import annotations

import argparse
import time

import httpx
from bench_server import bench_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--database", default="", help="SQLAlchemy URL (default: SQLite in a temporary folder)")
    ap.add_argument("--side", type=int, default=64, help="grid of side x side runs (64: 4,096, the cap)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    assert 1 <= args.side <= 64 and 1 <= args.repeats <= 5, "bounded on purpose"

    rows = []
    with bench_server(args.database, prefix="scalerl-grid-", interval_refit=False) as (base, token):
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=300)
        for rep in range(args.repeats):
            doc = {
                "name": f"grid-{rep}",
                "task": "synthetic-addition",
                "model": "tiny",
                "budget": 1000.0,
                "max_runs": args.side * args.side,
                "grid": {
                    "batch.prompts": list(range(8, 8 + args.side)),
                    "optimizer.lr": [1e-6 * (i + 1) for i in range(args.side)],
                },
                "seeds": [0],
            }
            t0 = time.perf_counter()
            resp = api.post("/api/v1/experiments", json=doc)
            post_s = time.perf_counter() - t0
            resp.raise_for_status()
            created = resp.json()
            t0 = time.perf_counter()
            n, offset = 0, 0
            while True:
                page = api.get("/api/v1/runs", params={"experiment_id": created["id"], "offset": offset, "limit": 1000})
                page.raise_for_status()
                n += len(page.json())
                offset += 1000
                if len(page.json()) < 1000:
                    break
            list_s = time.perf_counter() - t0
            rows.append((created["n_runs"], post_s, len(resp.content), len(created.get("runs", [])), n, list_s))
    print("| runs | POST s | answer bytes | runs in answer | runs listed (pages of 1000) | listing s |")
    print("|---|---|---|---|---|---|")
    for runs, post_s, size, in_answer, listed, list_s in rows:
        print(f"| {runs} | {post_s:.2f} | {size:,} | {in_answer} | {listed} | {list_s:.2f} |")


if __name__ == "__main__":
    main()
