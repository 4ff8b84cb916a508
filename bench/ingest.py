"""Service benchmark: ingestion throughput and metrics-POST-to-refreshed-forecast latency through the real HTTP API.

Starts ``uvicorn scalerl.app:create_app`` in a subprocess on an isolated, freshly migrated database (Postgres by
default: ``scalerl_bench_<random>`` created and dropped on the admin URL; or a temporary SQLite file), registers
``--runs`` runs and then measures two things:

1. throughput: ``--clients`` threads post batches of ``--batch`` points round-robin over all runs; one point in
   ``--eval-every`` carries a pass rate (training metrics every step, validation every N steps, as trainers log),
   so every batch refits its run; points/s = points accepted / wall time.
2. latency: one client posts small batches (``--latency-batch`` points) to each of the runs, which by then hold
   many points each; the round trip of a metrics POST includes the refit, so the answer *is* the refreshed
   forecast. Reports p50/p95/max over ``--latency-posts`` posts, plus the server-side share.

Usage: .venv/bin/python bench/ingest.py [--database postgres|sqlite] [--runs 100] ...
Prints a Markdown table last.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_args import int_flags  # noqa: E402  (bench/, this script's folder)
from bench_server import wait_healthy  # noqa: E402  (bench/, this script's folder)
from bench_timing import run_threads  # noqa: E402

from server.lifecycle.tokens import create_token  # noqa: E402
from server.store.db import make_engine, session_factory  # noqa: E402
from server.store.migrate import upgrade  # noqa: E402


@dataclass
class Args:
    database: str
    admin_url: str
    runs: int
    clients: int
    batch: int
    batches_per_run: int
    latency_batch: int
    latency_posts: int
    eval_every: int


def parse() -> Args:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    p.add_argument(
        "--admin-url", default=os.environ.get("SCALERL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1/postgres")
    )
    int_flags(p, runs=100, clients=4)
    p.add_argument("--batch", type=int, default=1000, help="points per batch in the throughput phase")
    int_flags(p, batches_per_run=3, latency_batch=10, latency_posts=400)
    p.add_argument("--eval-every", type=int, default=10, help="one point in N has a pass rate")
    a = p.parse_args()
    return Args(
        a.database,
        a.admin_url,
        a.runs,
        a.clients,
        a.batch,
        a.batches_per_run,
        a.latency_batch,
        a.latency_posts,
        a.eval_every,
    )


@contextmanager
def database(args: Args) -> Iterator[str]:
    if args.database == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db"
        return
    name = f"scalerl_bench_{secrets.token_hex(4)}"
    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield args.admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(args.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its live children (the fit worker), from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:  # fields[1] is the parent pid
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


@contextmanager
def server(url: str) -> Iterator[tuple[str, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    env = {**os.environ, "SCALERL_DATABASE_URL": url, "SCALERL_HOME": tempfile.mkdtemp(prefix="scalerl-bench-")}
    cmd = [
        sys.executable, "-m", "uvicorn", "--factory", "scalerl.app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(base):
            raise RuntimeError("server did not start")
        yield base, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def sigmoid(c: np.ndarray, A: float = 0.6, B: float = 1.8, C_mid: float = 2500.0, R0: float = 0.3) -> np.ndarray:
    return R0 + (A - R0) / (1.0 + (C_mid / c) ** B)


def points(first_step: int, n: int, rng: np.random.Generator, eval_every: int) -> list[dict[str, object]]:
    """Training metrics every step; a pass rate on steps divisible by ``eval_every``."""
    steps = np.arange(first_step, first_step + n)
    c = steps * 2.0
    y = np.clip(sigmoid(c) + rng.normal(0, 0.01, n), 0, 1)
    out: list[dict[str, object]] = []
    for s, ci, yi in zip(steps, c, y, strict=True):
        point: dict[str, object] = {"step": int(s), "compute": float(ci), "metrics": {"loss": 1.0, "entropy": 0.5}}
        if s % eval_every == 0:
            point["pass_rate"] = float(yi)
        out.append(point)
    return out


def main() -> None:
    args = parse()
    rng = np.random.default_rng(0)
    with database(args) as url:
        upgrade(url)
        engine = make_engine(url)
        with session_factory(engine).begin() as session:
            token = create_token(session, "bench", ["write"]).secret
        engine.dispose()
        headers = {"Authorization": f"Bearer {token}"}
        with server(url) as (base, pid), httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            run_ids = [
                client.post("/api/v1/runs", json={"name": f"run-{i}", "budget": 1e5}).json()["id"]
                for i in range(args.runs)
            ]
            # Throughput: batches prepared up front, then posted by concurrent clients.
            jobs = [
                (run_id, points(1 + k * args.batch, args.batch, rng, args.eval_every))
                for k in range(args.batches_per_run)
                for run_id in run_ids
            ]
            lock = threading.Lock()
            accepted = 0
            errors: list[str] = []

            def worker(my_jobs: list[tuple[int, list[dict[str, object]]]]) -> None:
                nonlocal accepted
                with httpx.Client(base_url=base, headers=headers, timeout=120) as c:
                    for run_id, pts in my_jobs:
                        r = c.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts})
                        with lock:
                            if r.status_code == 200:
                                accepted += r.json()["accepted"]
                            else:
                                errors.append(f"{r.status_code}: {r.text[:200]}")

            threads = [threading.Thread(target=worker, args=(jobs[i :: args.clients],)) for i in range(args.clients)]
            cpu0 = cpu_seconds(pid)
            wall = run_threads(threads)
            cpu_throughput = cpu_seconds(pid) - cpu0
            if errors:
                raise SystemExit(f"{len(errors)} failed posts, first: {errors[0]}")
            throughput = accepted / wall

            # Latency: small batches, one client, runs round-robin; each run already holds many points.
            next_step = 1 + args.batches_per_run * args.batch
            latencies = []
            server_ms = []
            cpu1 = cpu_seconds(pid)
            fits = 0
            for i in range(args.latency_posts):
                run_id = run_ids[i % len(run_ids)]
                first = next_step + (i // len(run_ids)) * args.latency_batch
                pts = points(first, args.latency_batch, rng, args.eval_every)
                t1 = time.perf_counter()
                r = client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts})
                latencies.append((time.perf_counter() - t1) * 1000)
                server_ms.append(float(r.headers["server-timing"].split("dur=")[1]))
                assert r.status_code == 200 and r.json()["accepted"] == args.latency_batch, r.text
                fits += r.json()["fit"] is not None
            lat = np.array(latencies)
            cpu_latency = cpu_seconds(pid) - cpu1
            n_points = args.batches_per_run * args.batch + (args.latency_posts // args.runs) * args.latency_batch

    print()
    print(f"| database | {args.database} |")
    print("|---|---|")
    n_eval = n_points // args.eval_every
    print(f"| runs | {args.runs} (about {n_points} points each at the end, {n_eval} with a pass rate) |")
    print(f"| throughput phase | {len(jobs)} batches of {args.batch} points, {args.clients} concurrent clients |")
    print(f"| points ingested | {accepted} in {wall:.2f} s |")
    print(f"| **ingestion throughput** | **{throughput:,.0f} points/s** (each batch refits its run) |")
    per_k = cpu_throughput / accepted * 1000 * 1000
    print(f"| server CPU (throughput phase) | {cpu_throughput:.1f} s = {per_k:.1f} ms per 1000 points |")
    print(f"| latency phase | {args.latency_posts} posts of {args.latency_batch} points, 1 client, {fits} refits |")
    p50, p95 = np.percentile(lat, 50), np.percentile(lat, 95)
    print(f"| **POST -> refreshed forecast** | **p50 {p50:.1f} ms, p95 {p95:.1f} ms**, max {lat.max():.1f} ms |")
    s50, s95 = np.percentile(server_ms, 50), np.percentile(server_ms, 95)
    print(f"| ... of which inside the service (Server-Timing) | p50 {s50:.1f} ms, p95 {s95:.1f} ms |")
    print(f"| server CPU (latency phase) | {cpu_latency / args.latency_posts * 1000:.1f} ms per POST |")
    print(f"| machine load (1-min average, at the end) | {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs |")


if __name__ == "__main__":
    main()
