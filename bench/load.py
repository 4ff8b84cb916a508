"""A bounded load test of the metrics path against a real server process on 127.0.0.1, SQLite and PostgreSQL side by
side (a grid's runs posting at once): ``--runs`` runs of one grid post ``--batch``-point batches (a pass rate every
``--eval-every`` points) from ``--clients`` threads, while one more client posts to a run that already holds
``--heavy-points`` points (so its refits see a long curve). Prints accepted points/s, p50/p95 of the round trip and
of the server's own time (``Server-Timing``) for POSTs that carry an evaluation and for those that do not, the 5xx
count, and checks at the end that every accepted point is stored (lost points). ``--flat`` instead measures the
server time of a 10-point POST with an evaluation as one run grows (1k ... 200k stored points). Both also report
how long after the last POST every run's stored fit has seen all its evaluations (0 where the server fits on the
request path).

    .venv/bin/python bench/load.py                                  # both databases, 20 s each
    .venv/bin/python bench/load.py --databases sqlite --flat
    .venv/bin/python bench/load.py --ci                             # 5 s, 10 runs, 20k heavy points and a burst of
                                                                    # 16 concurrent 250 KB YAML grids: exit 1 on a
                                                                    # 5xx, a lost point or a /healthz over 1 s
                                                                    # (tests/server/http/test_load_ci.py)
    .venv/bin/python bench/load.py --saturate                       # 100 runs, each posting without pause

Every client honours a 503's ``Retry-After`` and resends the same batch (as the Reporter and the worker do): such
answers are counted as ``shed``, not as 5xx. ``/healthz`` is polled every 20 ms throughout (p50 / p99 / max).

PostgreSQL: a fresh database ``scalerl_load_<random>`` is created on ``--admin-url`` and dropped afterwards. Only
127.0.0.1 is ever contacted. Timings on a shared machine are noisy: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from bench_args import int_flags
from bench_server import REPO, bench_server
from bench_timing import run_threads

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _q(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


@contextmanager
def database(kind: str, admin_url: str) -> Iterator[str]:
    """'' (SQLite in the server's temporary home) or a fresh PostgreSQL database, dropped afterwards."""
    if kind == "sqlite":
        yield ""
        return
    name = f"scalerl_load_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _points(first: int, n: int, eval_every: int, total: int = 200_000) -> list[dict[str, object]]:
    return [
        {
            "step": i,
            "compute": float(i + 1),
            "metrics": {"loss": 1.0 / (i + 1)},
            **({"pass_rate": 0.2 + 0.5 * min(i, total) / total} if i % eval_every == 0 else {}),
        }
        for i in range(first, first + n)
    ]


def _server_ms(r: httpx.Response) -> float:
    timing = r.headers.get("server-timing", "")
    return float(timing.split("dur=")[1]) if "dur=" in timing else float("nan")


def _caught_up(api: httpx.Client, runs: list[int], resend: list[dict[str, object]], timeout: float = 120.0) -> float:
    """Seconds until every run's stored fit has seen all its evaluations: a resend of ``resend`` (stored already,
    so it adds nothing) answers ``fit_pending`` false. 0 for a server that fits on the request path (no field)."""
    t0 = time.perf_counter()
    todo = list(runs)
    while todo and time.perf_counter() - t0 < timeout:
        todo = [
            r for r in todo if api.post(f"/api/v1/runs/{r}/metrics", json={"points": resend}).json().get("fit_pending")
        ]
        if todo:
            time.sleep(0.05)
    return float("nan") if todo else time.perf_counter() - t0


def _seed(api: httpx.Client, run_id: int, n: int, eval_every: int) -> None:
    for start in range(0, n, 10_000):
        api.post(f"/api/v1/runs/{run_id}/metrics", json={"points": _points(start, min(10_000, n - start), eval_every)})


@dataclass
class Tally:
    rtt: dict[bool, list[float]] = field(default_factory=lambda: {True: [], False: []})
    server: dict[bool, list[float]] = field(default_factory=lambda: {True: [], False: []})
    #: Seconds from a batch's first attempt to its acceptance (resends after a shed included).
    e2e: list[float] = field(default_factory=list)
    accepted: int = 0
    http_5xx: int = 0
    shed: int = 0
    other_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def load(args: argparse.Namespace, db: str) -> tuple[list[str], bool]:
    """The load scenario on one database; (report lines, passed: no 5xx, no lost point)."""
    extra: dict[str, object] = {} if args.inflight is None else {"max_inflight_writes": args.inflight}
    extra |= {k: json.loads(v) for k, _, v in (kv.partition("=") for kv in args.set)}
    with bench_server(
        db, prefix="scalerl-load-", root=args.root, interval_refit_min_seconds=args.refit_seconds, **extra
    ) as (base, token):
        h = {"Authorization": f"Bearer {token}"}
        api = httpx.Client(base_url=base, headers=h, timeout=120)
        doc = {
            "name": "load",
            "task": "synthetic-addition",
            "model": "tiny",
            "budget": 1e9,
            "max_runs": args.runs,
            "grid": {"batch.prompts": list(range(8, 8 + args.runs))},
        }
        created = api.post("/api/v1/experiments", json={**doc}, params={"runs_limit": args.runs})
        created.raise_for_status()
        runs = [r["id"] for r in created.json()["runs"]]
        heavy = api.post("/api/v1/runs", json={"name": "heavy"}).json()["id"]
        t0 = time.perf_counter()
        _seed(api, heavy, args.heavy_points, args.eval_every)
        seed_s = time.perf_counter() - t0
        tally = Tally()
        stop = time.monotonic() + args.seconds
        next_step = {r: 0 for r in runs} | {heavy: args.heavy_points}
        posted = {r: 0 for r in runs} | {heavy: 0}
        first_try: dict[tuple[int, int], float] = {}

        def client(mine: list[int]) -> None:
            with httpx.Client(base_url=base, headers=h, timeout=120) as c:
                k = 0
                while time.monotonic() < stop and mine:
                    run_id = mine[k % len(mine)]
                    k += 1
                    pts = _points(next_step[run_id], args.batch, args.eval_every)
                    has_eval = any("pass_rate" in p for p in pts)
                    t = time.perf_counter()
                    first_try.setdefault((run_id, next_step[run_id]), t)
                    try:
                        r = c.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts})
                    except httpx.HTTPError:
                        with tally.lock:
                            tally.other_errors += 1
                        continue  # the same steps are resent next time (idempotent)
                    dt = time.perf_counter() - t
                    if r.status_code == 503 and r.headers.get("retry-after"):
                        with tally.lock:
                            tally.shed += 1
                        time.sleep(float(r.headers["retry-after"]))
                        continue  # shed: the same batch is resent
                    with tally.lock:
                        if r.status_code >= 500:
                            tally.http_5xx += 1
                        elif r.status_code != 200:
                            tally.other_errors += 1
                        else:
                            tally.rtt[has_eval].append(dt)
                            tally.server[has_eval].append(_server_ms(r))
                            tally.accepted += r.json()["accepted"]
                            tally.e2e.append(time.perf_counter() - first_try.pop((run_id, next_step[run_id]), t))
                            posted[run_id] += args.batch
                            next_step[run_id] += args.batch

        share = [runs[i :: args.clients] for i in range(args.clients)]
        threads = [threading.Thread(target=client, args=(s,)) for s in share]
        threads.append(threading.Thread(target=client, args=([heavy],)))
        healthz: list[float] = []
        burst: list[int] = []
        threads.append(threading.Thread(target=_poll_healthz, args=(base, stop, healthz)))
        if args.yaml_burst:
            threads.append(threading.Thread(target=_yaml_burst, args=(base, h, args.yaml_burst, tally, burst)))
        elapsed = run_threads(threads)
        caught_up = _caught_up(api, [*runs, heavy], _points(0, 1, args.eval_every))
        lost = twice = 0
        for run_id in [*runs, heavy]:
            stored = api.get(f"/api/v1/runs/{run_id}").json()["n_points"]
            expected = posted[run_id] + (args.heavy_points if run_id == heavy else 0)
            lost += max(0, expected - stored)
            twice += max(0, stored - expected)
        final = [api.get("/healthz") for _ in range(3)]
        kind = "postgresql" if db else "sqlite"
        statuses = ", ".join(f"{k}: {burst.count(k)}" for k in sorted(set(burst))) or "-"
        lines = [
            f"| {kind} | {args.runs} + 1 ({args.heavy_points:,} pts, seeded in {seed_s:.0f} s) | {elapsed:.0f} | "
            f"{tally.accepted / elapsed:,.0f} | "
            + " | ".join(
                f"{len(tally.rtt[e])} | {1000 * _q(tally.rtt[e], 0.5):.0f} / {1000 * _q(tally.rtt[e], 0.95):.0f} | "
                f"{_q(tally.server[e], 0.5):.0f} / {_q(tally.server[e], 0.95):.0f}"
                for e in (True, False)
            )
            + f" | {1000 * _q(tally.e2e, 0.5):.0f} / {1000 * _q(tally.e2e, 0.95):.0f}"
            + f" | {tally.http_5xx} | {tally.shed} | {tally.other_errors} | {lost} | {twice} | {caught_up:.1f} | "
            f"{1000 * _q(healthz, 0.5):.0f} / {1000 * _q(healthz, 0.99):.0f} / {1000 * max(healthz, default=0):.0f} | "
            f"{statuses} |"
        ]
        ok = tally.http_5xx == 0 and lost == 0 and twice == 0 and all(r.status_code == 200 for r in final)
        ok = ok and (not args.ci or max(healthz, default=0) < 1.0)
        return lines, ok


def _poll_healthz(base: str, stop: float, out: list[float]) -> None:
    """/healthz every 20 ms until ``stop`` (monotonic); the round trips into ``out``."""
    with httpx.Client(base_url=base, timeout=30) as c:
        while time.monotonic() < stop:
            t = time.perf_counter()
            c.get("/healthz")
            out.append(time.perf_counter() - t)
            time.sleep(0.02)


def _yaml_burst(base: str, h: dict[str, str], n: int, tally: Tally, out: list[int]) -> None:
    """One second in: ``n`` concurrent 250 KB YAML grid documents (each refused by its list cap), resent after a
    503's Retry-After; their final statuses into ``out`` (a 5xx that is not a shed counts in ``tally``)."""
    time.sleep(1.0)
    axis = ", ".join(f"{k * 1e-6:.8f}" for k in range(20_800))

    def one(i: int) -> None:
        body = f"name: burst{i}\ntask: t\nmodel: tiny\nbudget: 1\ngrid:\n  optimizer.lr: [{axis}]\n".encode()
        with httpx.Client(base_url=base, headers={**h, "Content-Type": "application/yaml"}, timeout=120) as c:
            for _ in range(50):
                r = c.post("/api/v1/experiments", content=body)
                if r.status_code == 503 and r.headers.get("retry-after"):
                    with tally.lock:
                        tally.shed += 1
                    time.sleep(float(r.headers["retry-after"]))
                    continue
                break
        with tally.lock:
            out.append(r.status_code)
            tally.http_5xx += r.status_code >= 500

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def flat(args: argparse.Namespace, db: str) -> list[str]:
    """Server time of a 10-point POST with one evaluation as one run grows."""
    sizes = [s for s in (1_000, 10_000, 50_000, 100_000, 200_000) if s <= args.heavy_points]
    with bench_server(db, prefix="scalerl-flat-", root=args.root, interval_refit=False) as (base, token):
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        run_id = api.post("/api/v1/runs", json={"name": "grows"}).json()["id"]
        stored, cells = 0, []
        for size in sizes:
            while stored < size:
                n = min(10_000, size - stored)
                api.post(f"/api/v1/runs/{run_id}/metrics", json={"points": _points(stored, n, args.eval_every)})
                stored += n
            ms = []
            for _ in range(20):
                pts = _points(stored, 10, 10)  # the first of the ten carries the evaluation
                r = api.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts})
                answer = r.json()
                assert r.status_code == 200 and (answer["fit"] is not None or answer.get("fit_pending")), r.text
                ms.append(_server_ms(r))
                stored += 10
            lag = _caught_up(api, [run_id], _points(stored - 10, 10, 10)[:1])
            cells.append(f"{_q(ms, 0.5):.0f} ({1000 * lag:.0f})")
    kind = "postgresql" if db else "sqlite"
    return [f"| {kind} | " + " | ".join(cells) + " |"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--databases", default="sqlite,postgresql")
    ap.add_argument("--admin-url", default=ADMIN_URL)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--clients", type=int, default=8, help="threads sharing the grid's runs (plus one: heavy)")
    int_flags(ap, batch=20, eval_every=10, heavy_points=200_000)
    ap.add_argument("--refit-seconds", type=float, default=30.0, help="interval_refit_min_seconds of the server")
    ap.add_argument("--flat", action="store_true", help="server time of a POST as one run grows, instead")
    ap.add_argument("--root", type=Path, default=REPO, help="the checkout whose server is measured (e.g. an older one)")
    ap.add_argument("--inflight", type=int, default=None, help="the server's max_inflight_writes (default: its own)")
    ap.add_argument("--set", action="append", default=[], help="a server setting, NAME=JSON (repeatable)")
    ap.add_argument("--yaml-burst", type=int, default=0, help="concurrent 250 KB YAML grids sent 1 s in")
    ap.add_argument("--ci", action="store_true", help="short: 5 s, 10 runs, 20k heavy points, a 16-body YAML burst")
    ap.add_argument("--saturate", action="store_true", help="100 runs, each posting from its own client, no pause")
    args = ap.parse_args()
    if args.ci:
        args.seconds, args.runs, args.heavy_points, args.clients, args.yaml_burst = 5.0, 10, 20_000, 4, 16
    if args.saturate:
        args.runs, args.clients = 100, 100
    assert args.seconds <= 120 and 1 <= args.runs <= 1000 and args.heavy_points <= 500_000, "bounded on purpose"
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {platform.processor() or ''}")
    print(f"# {' '.join(sys.argv)}  (server from {args.root})")
    ok = True
    if args.flat:
        print(
            "| database | 1k | 10k | 50k | 100k | 200k |  (server ms, median of 20 POSTs; in brackets: ms until "
            "the stored fit has seen them)"
        )
        print("|---|---|---|---|---|---|")
    else:
        print(
            "| database | runs | s | accepted points/s | POSTs with eval | p50 / p95 ms | server p50 / p95 ms | "
            "POSTs without | p50 / p95 ms | server p50 / p95 ms | batch end to end p50 / p95 ms (resends included) | "
            "5xx | shed | other errors | lost points | stored twice | fits current after s | "
            "/healthz p50 / p99 / max ms | YAML burst |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in args.databases.split(","):
        with database(kind.strip(), args.admin_url) as db:
            if args.flat:
                lines = flat(args, db)
            else:
                lines, passed = load(args, db)
                ok = ok and passed
        print("\n".join(lines), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
