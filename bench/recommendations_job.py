"""The recommendations POST on a 60-run grid of 800 points a run (``stall.py``'s ``recs`` data), checkouts side by
side: how long from the POST until the assessment is stored, and how long the POST itself took to answer.

A checkout whose POST answers ``202`` (a job, ``GET /api/v1/jobs/{id}``) is timed until the job succeeded; one whose
POST answers ``200`` (the synchronous POST of older commits) until that answer. Each repetition starts a fresh server
on fresh data for every checkout in turn (``--roots``, interleaved, so a noisy neighbour hits them alike), on each
database (``--databases``: ``sqlite`` and/or a PostgreSQL admin URL, on which a fresh database is created and dropped
afterwards). Ingestion to another run goes on meanwhile (5 points every 50 ms, as in ``stall.py``); its p50 and max
round trips are reported, and a digest of the stored assessment (without its times, versions and ETAs) with its
counts of advice: equal digests across checkouts, the same numbers. ``--shape sigmoid`` gives the runs curves that
the grid compares and decides (``flat``, the default: ``stall.py``'s). ``--refit-every 0`` has the server assess in
the background after every point fit (its ``interval_refit_min_seconds``), so that a background assessment of the
grid overlaps the POST. ``--burst N`` also posts N recommendations POSTs to N grids at once, then one metrics POST,
and reports how long that write took (the write slots: it must not wait for the assessments).

    .venv/bin/python bench/recommendations_job.py --roots /tmp/base55,. --reps 3 \\
        --databases sqlite,postgresql://postgres@127.0.0.1:5432/postgres [--shape sigmoid] [--refit-every 0]

Only 127.0.0.1 is contacted. Timings on a shared machine are noisy: compare the checkouts of one invocation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from bench_server import REPO, bench_server
from load import database
from stall import _ingest_during, _points, _q, _seed, _send

#: The longest a job is waited for per ``GET ?wait=`` (the server bounds it too).
WAIT_S = 30


def _sigmoid_points(k: int, n: int) -> list[dict[str, Any]]:
    """Run ``k``'s ``n`` points: a pass rate every 10 steps on a sigmoid whose ceiling grows with ``k`` (in 7 steps),
    with deterministic noise, so that the grid's decisions compare, stop and scale runs."""
    rng = np.random.default_rng(k)
    ceiling = 0.45 + 0.05 * (k % 7)
    out: list[dict[str, Any]] = []
    for i in range(n):
        point: dict[str, Any] = {"step": i, "compute": float(i + 1)}
        if i % 10 == 0:
            y = 0.1 + (ceiling - 0.1) / (1.0 + (250.0 / (i + 1)) ** 1.5) + float(rng.normal(0.0, 0.01))
            point["pass_rate"] = min(1.0, max(0.0, y))
        out.append(point)
    return out


def _grid(api: httpx.Client, name: str, runs: int, points: int, shape: str = "flat") -> int:
    """A grid of ``runs`` runs of ``points`` points each: ``flat`` (``stall.py``'s curves, every run alike, budget
    1e9) or ``sigmoid`` (:func:`_sigmoid_points`, budget 1,500: the runs are compared and decided)."""
    budget = 1e9 if shape == "flat" else 1500.0
    doc = {"name": name, "task": "t", "model": "tiny", "budget": budget, "max_runs": runs,
           "grid": {"batch.prompts": list(range(8, 8 + runs))}}  # fmt: skip
    exp = api.post("/api/v1/experiments", json=doc, params={"runs_limit": runs}).json()
    for k, r in enumerate(exp["runs"]):
        if shape == "flat":
            _seed(api, r["id"], points)
        else:
            _send(api, "POST", f"/api/v1/runs/{r['id']}/metrics", json={"points": _sigmoid_points(k, points)})
    return int(exp["id"])


#: What says when or how fast, not what was decided: left out of the stored assessment's digest (an ETA divides the
#: compute used by the wall time since the run started, which differs from one server to the next).
UNTIMED = ("version", "computed_at", "data_as_of", "assessment_version", "eta_budget_seconds")


def _digest(api: httpx.Client, experiment_id: int) -> str:
    """The stored assessment's digest without :data:`UNTIMED` (equal digests: the same numbers and words), and its
    counts of advice."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in UNTIMED}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    body = strip(api.get(f"/api/v1/experiments/{experiment_id}/assessment").json())
    counts = ", ".join(f"{k} {v}" for k, v in sorted(body.get("counts", {}).items()))
    return f"{hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]} ({counts})"


def _assess(api: httpx.Client, experiment_id: int) -> tuple[float, float, str]:
    """POST the recommendations and wait for them: (seconds the POST took to answer, seconds until stored, how)."""
    t0 = time.perf_counter()
    r, _ = _send(api, "POST", f"/api/v1/experiments/{experiment_id}/recommendations")
    answered = time.perf_counter() - t0
    if r.status_code == 200:
        return answered, answered, "200 (synchronous)"
    if r.status_code != 202:
        raise RuntimeError(f"recommendations POST: {r.status_code} {r.text[:300]}")
    status_url = r.json()["status_url"]
    while True:
        job = api.get(status_url, params={"wait": WAIT_S}).json()
        if job["status"] in ("succeeded", "failed"):
            done = time.perf_counter() - t0
            return answered, done, f"202, job {job['status']}"


def _burst(api: httpx.Client, ids: list[int], other: int) -> tuple[float, list[int]]:
    """POST the recommendations of every grid in ``ids`` at once, then one metrics POST: its round trip, and the
    POSTs' status codes."""
    codes: list[int] = [0] * len(ids)

    def one(i: int) -> None:
        with httpx.Client(base_url=str(api.base_url), headers=api.headers, timeout=300) as c:
            codes[i] = c.post(f"/api/v1/experiments/{ids[i]}/recommendations").status_code

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    r = api.post(f"/api/v1/runs/{other}/metrics", json={"points": _points(50_000, 5)})
    took = time.perf_counter() - t0 if r.status_code == 200 else float("inf")
    for t in threads:
        t.join()
    return took, codes


def one_server(root: Path, db: str, runs: int, points: int, burst: int, shape: str, **settings: Any) -> dict[str, Any]:
    with bench_server(db, prefix="scalerl-recsjob-", root=root, **settings) as (base, token):
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=300)
        experiment_id = _grid(api, "recs", runs, points, shape)
        other = api.post("/api/v1/runs", json={"name": "elsewhere"}).json()["id"]
        out: dict[str, Any] = {}
        box: list[tuple[float, float, str]] = []
        busy = threading.Thread(target=lambda: box.append(_assess(api, experiment_id)))
        busy.start()
        during = _ingest_during(api, other, busy, 1000)
        busy.join()
        out["answered"], out["done"], out["how"] = box[0]
        out["ingest_p50"], out["ingest_max"] = _q(during, 0.5), max(during, default=float("nan"))
        out["digest"] = _digest(api, experiment_id)
        if burst:
            ids = [_grid(api, f"burst{i}", runs, points // 4) for i in range(burst)]
            out["burst_write"], out["burst_codes"] = _burst(api, ids, other)
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", default=str(REPO), help="comma-separated checkouts ('.' is this one)")
    ap.add_argument("--databases", default="sqlite", help="comma-separated: sqlite and/or PostgreSQL admin URLs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--points", type=int, default=800)
    ap.add_argument(
        "--refit-every",
        type=float,
        default=None,
        help="the server's interval_refit_min_seconds (0: the background assessment overlaps the POST)",
    )
    ap.add_argument("--shape", choices=("flat", "sigmoid"), default="flat", help="the runs' curves (see _grid)")
    ap.add_argument("--burst", type=int, default=0, help="also POST this many grids' recommendations at once")
    args = ap.parse_args()
    roots = [REPO if r == "." else Path(r).resolve() for r in args.roots.split(",")]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {args.runs} runs x {args.points} points, "
          f"{args.reps} repetitions")  # fmt: skip
    print("| database | checkout | rep | POST answered s | stored after s | how | ingestion p50 / max ms | assessment "
          "digest | burst |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in args.databases.split(","):
        label = "SQLite" if kind == "sqlite" else "PostgreSQL"
        done: dict[Path, list[float]] = {root: [] for root in roots}
        for rep in range(args.reps):
            for root in roots:
                with database("sqlite" if kind == "sqlite" else "postgres", kind) as db:
                    extra = {} if args.refit_every is None else {"interval_refit_min_seconds": args.refit_every}
                    o = one_server(root, db, args.runs, args.points, args.burst, args.shape, **extra)
                done[root].append(o["done"])
                burst = (
                    f"metrics POST {1000 * o['burst_write']:.0f} ms beside {args.burst} POSTs {o['burst_codes']}"
                    if args.burst
                    else ""
                )
                ingest = f"{1000 * o['ingest_p50']:.0f} / {1000 * o['ingest_max']:.0f}"
                print(f"| {label} | {root} | {rep} | {o['answered']:.3f} | {o['done']:.2f} | {o['how']} | {ingest} | "
                      f"{o['digest']} | {burst} |", flush=True)  # fmt: skip
        for root in roots:
            xs = done[root]
            print(f"| {label} | {root} | median | | {statistics.median(xs):.2f} (min {min(xs):.2f}, max {max(xs):.2f}) "
                  f"| | | | |")  # fmt: skip


if __name__ == "__main__":
    main()
