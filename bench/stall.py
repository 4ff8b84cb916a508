"""Issue 40's stalling bodies against a real server process on 127.0.0.1 (SQLite by default): for each, the answer's
status and time, and the slowest ``/healthz`` answered while it was being handled (polled every 20 ms). Only
127.0.0.1 is ever contacted.

    .venv/bin/python bench/stall.py [--database postgresql://...] [--root OLDER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import httpx
from bench_server import REPO, bench_server


def measure(base: str, h: dict[str, str], path: str, body: bytes, ctype: str) -> tuple[int, float, float]:
    out: list[httpx.Response] = []
    done = threading.Event()

    def send() -> None:
        try:
            out.append(httpx.post(f"{base}{path}", content=body, headers={**h, "Content-Type": ctype}, timeout=300))
        finally:
            done.set()

    slowest = 0.0
    t0 = time.perf_counter()
    threading.Thread(target=send).start()
    with httpx.Client(timeout=300) as c:
        while not done.is_set():
            t = time.perf_counter()
            c.get(f"{base}/healthz")
            slowest = max(slowest, time.perf_counter() - t)
            time.sleep(0.02)
    return (out[0].status_code if out else -1), time.perf_counter() - t0, slowest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--database", default="")
    ap.add_argument("--root", type=Path, default=REPO)
    args = ap.parse_args()
    with bench_server(args.database, prefix="scalerl-stall-", root=args.root) as (base, token):
        h = {"Authorization": f"Bearer {token}"}
        doc = {"name": "s", "task": "t", "model": "tiny", "budget": 1.0, "grid": {"batch.prompts": [8, 16]}}
        run_id = httpx.post(f"{base}/api/v1/experiments", json=doc, headers=h).json()["runs"][0]["id"]
        axis = ", ".join(f"{i * 1e-6:.8f}" for i in range(18_000))
        cases = [
            (
                "metrics: 2.6M empty points (7.8 MB)",
                f"/api/v1/runs/{run_id}/metrics",
                b'{"points":[' + b",".join([b"{}"] * 2_600_000) + b"]}",
                "application/json",
            ),
            (
                "YAML grid, 250 KB axis (dry run)",
                "/api/v1/experiments?dry_run=true",
                f"name: y\ntask: t\nmodel: m\nbudget: 1\ngrid:\n  optimizer.lr: [{axis}]\n".encode(),
                "application/yaml",
            ),
            (
                "YAML grid, 7 MB",
                "/api/v1/experiments",
                b"name: y\ntask: t\nmodel: m\nbudget: 1\ngrid:\n  a: [" + b"1, " * 2_400_000 + b"]\n",
                "application/yaml",
            ),
            (
                "JSON grid, 3.9M-value axis",
                "/api/v1/experiments?dry_run=true",
                b'{"name":"j","task":"t","model":"m","budget":1,"grid":{"a":[' + b",".join([b"1"] * 3_900_000) + b"]}}",
                "application/json",
            ),
            (
                "JSON grid, 1 MB recipe string x 256 runs",
                "/api/v1/experiments",
                (
                    '{"name":"r","task":"t","model":"m","budget":1,"recipe":{"length":{"interruption":{"phrase":"'
                    + "x" * 1_000_000
                    + '"}}},"grid":{"batch.prompts":['
                    + ",".join(str(i) for i in range(8, 264))
                    + "]}}"
                ).encode(),
                "application/json",
            ),
        ]
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, server from {args.root}")
        print("| body | status | answered in s | slowest /healthz meanwhile, ms |")
        print("|---|---|---|---|")
        for name, path, body, ctype in cases:
            status, took, slowest = measure(base, h, path, body, ctype)
            print(f"| {name} | {status} | {took:.2f} | {1000 * slowest:.0f} |", flush=True)


if __name__ == "__main__":
    main()
