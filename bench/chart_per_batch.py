"""What one metrics batch costs an open experiment page: the chart endpoint's time after the batch, and the bytes
of the batch's ``points`` event.

The experiment page refetches ``GET /api/v1/dashboard/experiments/{id}/chart`` on every event of its experiment
(debounced), so each metrics batch of any run costs each open page one chart request. This bench starts a real
server process (SQLite in a temporary home; interval refits off, so the chart request itself pays for any refit
its fits need), creates one experiment with ``--runs`` live runs (one grid: they are fitted jointly), gives each
run ``--evals`` evaluated points, then sends ``--batches`` batches of each kind to random runs and times the chart
request that follows each one:

- ``metrics``: 10 training steps that carry only other metrics (loss, entropy, ...);
- ``eval``: 10 training steps, the last one with a pass rate (the curve changes: a refit is due).

``--root`` runs the server from another checkout (e.g. a ``git worktree`` of an older commit) to compare.

    .venv/bin/python bench/chart_per_batch.py --runs 50 --batches 10
    git worktree add /tmp/before <commit> && .venv/bin/python bench/chart_per_batch.py --root /tmp/before
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from bench_server import bench_server


def _sigmoid(c: np.ndarray[Any, Any], A: float, B: float = 1.8, C_mid: float = 2500.0, R0: float = 0.3) -> Any:
    return R0 + (A - R0) / (1.0 + (C_mid / c) ** B)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--evals", type=int, default=30, help="evaluated points per run before the measurement")
    parser.add_argument("--batches", type=int, default=10, help="batches of each kind")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to serve")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    home = Path(tempfile.mkdtemp(prefix="scalerl-chart-bench-"))
    with bench_server(root=args.root.resolve(), home=home, interval_refit=False) as (base, token):
        _measure(args, rng, home, base, token)


def _measure(args: argparse.Namespace, rng: random.Random, home: Path, base: str, token: str) -> None:
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=600)
    try:
        doc = {
            "name": "chart-bench",
            "preset": "scalerl",
            "grid": {"batch.prompts": [32]},
            "seeds": list(range(args.runs)),
            "task": "gsm8k",
            "model": "tiny",
            "budget": 8000.0,
        }
        exp = http.post("/api/v1/experiments", json=doc).raise_for_status().json()
        runs = [r["id"] for r in exp["runs"]]
        step = {r: 0 for r in runs}
        compute = {r: 0.0 for r in runs}
        ceiling = {r: 0.4 + 0.3 * i / max(1, len(runs) - 1) for i, r in enumerate(runs)}
        for r in runs:  # each run's evaluated curve so far
            c = np.linspace(8000 / 40, 8000 * args.evals / 40, args.evals)
            y = np.clip(_sigmoid(c, ceiling[r]) + np.random.default_rng(r).normal(0, 0.004, c.size), 0, 1)
            pts = [
                {"step": (i + 1) * 10, "compute": float(ci), "pass_rate": float(yi), "metrics": {"loss": 1.0}}
                for i, (ci, yi) in enumerate(zip(c, y, strict=True))
            ]
            http.post(f"/api/v1/runs/{r}/metrics", json={"points": pts}).raise_for_status()
            step[r], compute[r] = pts[-1]["step"], pts[-1]["compute"]
        chart_url = f"/api/v1/dashboard/experiments/{exp['id']}/chart"
        t0 = time.perf_counter()
        http.get(chart_url).raise_for_status()
        first = time.perf_counter() - t0
        db = sqlite3.connect(home / "scalerl.db")
        results: dict[str, dict[str, list[float]]] = {}
        for kind in ("metrics", "eval"):
            seconds: list[float] = []
            event_bytes: list[float] = []
            for _ in range(args.batches):
                r = rng.choice(runs)
                batch = []
                for k in range(10):
                    step[r] += 1
                    compute[r] += 20.0
                    point: dict[str, Any] = {
                        "step": step[r],
                        "compute": compute[r],
                        "metrics": {"loss": 0.5, "train/entropy": 1.0, "train/reward_mean": 0.3},
                    }
                    if kind == "eval" and k == 9:
                        point["pass_rate"] = float(np.clip(_sigmoid(np.array(compute[r]), ceiling[r]), 0, 1))
                    batch.append(point)
                http.post(f"/api/v1/runs/{r}/metrics", json={"points": batch}).raise_for_status()
                t0 = time.perf_counter()
                http.get(chart_url).raise_for_status()
                seconds.append(time.perf_counter() - t0)
                (size,) = db.execute(
                    "SELECT length(data) FROM events WHERE type = 'points' ORDER BY id DESC"
                ).fetchone()
                event_bytes.append(float(size))
            results[kind] = {"seconds": seconds, "event_bytes": event_bytes}
        commit = subprocess.run(
            ["git", "-C", str(args.root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(args.root), "status", "--porcelain"], capture_output=True, text=True)
        print(
            f"chart per batch: {args.runs} runs x {args.evals} evaluations, {args.batches} batches of each kind; "
            f"server from {args.root} ({commit}{'+changes' if dirty.stdout.strip() else ''}); "
            f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}"
        )
        print(f"first chart (cold, every run fitted): {first * 1000:.0f} ms")
        print(f"{'batch':<8} {'chart median ms':>16} {'chart max ms':>13} {'points event bytes':>19}")
        for kind, res in results.items():
            s = res["seconds"]
            print(
                f"{kind:<8} {statistics.median(s) * 1000:>16.0f} {max(s) * 1000:>13.0f} "
                f"{statistics.mean(res['event_bytes']):>19.0f}"
            )
    finally:
        http.close()


if __name__ == "__main__":
    main()
