"""Idle and slow sockets against a real server process on 127.0.0.1: do they stop legitimate writes?

For each checkout (``--roots``: this one and, to compare, an older ``git worktree``), each database and each count
of sockets (``--counts``), the bench holds that many hostile sockets open for ``--hold`` seconds. They are spread
evenly over three tokens (none, a garbage one, a valid write token) and two behaviours (a POST head with a
Content-Length and then nothing; the same head, then one body byte every 2 s); a socket the server closes is opened
again ``--reopen-after`` seconds later (default 1: each hostile socket tries again every second; 0 turns the bench
into a connection flood of thousands of connections a second, which is a proxy's rate limit's job). Meanwhile:

- one legitimate client posts a 20-point metrics batch every 100 ms to its own run (resending after a 503's
  ``Retry-After``, as the Reporter does): its round-trip p50 / p95 / max and the number shed;
- a worker holds a lease of ``--lease`` seconds on a claimed run and renews it every ``lease / 5`` seconds (as the
  worker does, resending a shed renewal): the run must still be ``running`` at the end (not ``lost``);
- ``/healthz`` is polled every 20 ms (p50 / p99 / max).

    .venv/bin/python bench/sockets.py --roots .,/tmp/base55 --databases sqlite,postgresql --counts 8,64,512

Only 127.0.0.1 is contacted. PostgreSQL: a fresh database per case on ``--admin-url``, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import resource
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bench_server import REPO, bench_server
from load import ADMIN_URL, _q, database

KINDS = ("none", "garbage", "valid")
#: Where the hostile heads go: run registration has a body model (the framework reads a body before it checks a
#: token), a run's metrics read their body in the route (after the token).
HOSTILE_PATHS = {"register": "/api/v1/runs", "metrics": "/api/v1/runs/{run}/metrics"}
BEHAVIOURS = ("idle", "slow")


@dataclass
class Seen:
    legit: list[float] = field(default_factory=list)
    shed: int = 0
    errors: int = 0
    healthz: list[float] = field(default_factory=list)
    renewals_shed: int = 0
    reopened: int = 0
    answers: dict[int, int] = field(default_factory=dict)


async def _hostile(
    host: str, port: int, path: str, token: str | None, slow: bool, stop: float, seen: Seen, reopen_after: float
) -> None:
    """One hostile socket for as long as the bench holds them: opened again whenever the server closes it."""
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
        "Content-Length: 4096\r\n\r\n"
    ).encode()
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        try:
            writer.write(head)
            await writer.drain()
            while time.monotonic() < stop:
                try:
                    data = await asyncio.wait_for(reader.read(4096), timeout=2.0)
                except TimeoutError:
                    if slow:
                        writer.write(b" ")
                        await writer.drain()
                    continue
                if not data:
                    break  # closed by the server: open another
                if data.startswith(b"HTTP/1.1 "):
                    status = int(data.split(b" ", 2)[1])
                    seen.answers[status] = seen.answers.get(status, 0) + 1
        except OSError:
            pass
        finally:
            writer.close()
        seen.reopened += 1
        await asyncio.sleep(reopen_after)


def _hold(
    base: str, path: str, tokens: dict[str, str | None], n: int, stop: float, seen: Seen, reopen_after: float
) -> None:
    host, port = base.removeprefix("http://").split(":")

    async def main() -> None:
        await asyncio.gather(
            *(
                _hostile(
                    host,
                    int(port),
                    path,
                    tokens[KINDS[i % 3]],
                    BEHAVIOURS[(i // 3) % 2] == "slow",
                    stop,
                    seen,
                    reopen_after,
                )
                for i in range(n)
            )
        )

    asyncio.run(main())


def _legit(base: str, h: dict[str, str], run: int, stop: float, seen: Seen) -> None:
    step = 0
    with httpx.Client(base_url=base, headers=h, timeout=120) as c:
        while time.monotonic() < stop:
            pts = [{"step": s, "compute": float(s + 1), "pass_rate": 0.3} for s in range(step, step + 20)]
            t = time.perf_counter()
            try:
                r = c.post(f"/api/v1/runs/{run}/metrics", json={"points": pts})
            except httpx.HTTPError:
                seen.errors += 1
                continue
            if r.status_code == 503 and r.headers.get("retry-after"):
                seen.shed += 1
                time.sleep(float(r.headers["retry-after"]))
                continue
            if r.status_code != 200:
                seen.errors += 1
                continue
            seen.legit.append(time.perf_counter() - t)
            step += 20
            time.sleep(0.1)


def _renew(base: str, h: dict[str, str], run: int, lease: str, seconds: float, stop: float, seen: Seen) -> None:
    with httpx.Client(base_url=base, headers=h, timeout=120) as c:
        while time.monotonic() < stop:
            body = {"lease_id": lease, "lease_seconds": seconds}
            try:
                r = c.post(f"/api/v1/runs/{run}/heartbeat", json=body)
                if r.status_code == 503:
                    seen.renewals_shed += 1
                    time.sleep(float(r.headers.get("retry-after", "1")))
                    continue
            except httpx.HTTPError:
                pass
            time.sleep(seconds / 5)


def _healthz(base: str, stop: float, seen: Seen) -> None:
    with httpx.Client(base_url=base, timeout=30) as c:
        while time.monotonic() < stop:
            t = time.perf_counter()
            try:
                c.get("/healthz")
                seen.healthz.append(time.perf_counter() - t)
            except httpx.HTTPError:
                seen.healthz.append(30.0)
            time.sleep(0.02)


def case(root: Path, db: str, n: int, args: argparse.Namespace) -> str:
    with bench_server(db, prefix="scalerl-sockets-", root=root, reaper_interval_seconds=1.0) as (base, token):
        h = {"Authorization": f"Bearer {token}"}
        api = httpx.Client(base_url=base, headers=h, timeout=60)
        doc = {"name": "sockets", "task": "synthetic-addition", "model": "tiny", "budget": 1e9}
        exp = api.post("/api/v1/experiments", json=doc)
        exp.raise_for_status()
        claimed = api.post("/api/v1/runs/claim", json={"worker": "bench", "lease_seconds": args.lease}).json()
        leased, lease_id = claimed["run"]["id"], claimed["lease_id"]
        legit_run = api.post("/api/v1/runs", json={"name": "legit"}).json()["id"]
        target = api.post("/api/v1/runs", json={"name": "target"}).json()["id"]
        tokens = {"none": None, "garbage": "srl_" + "g" * 43, "valid": token}
        seen = Seen()
        stop = time.monotonic() + args.hold
        hostile = threading.Thread(
            target=_hold,
            args=(base, HOSTILE_PATHS[args.target].format(run=target), tokens, n, stop, seen, args.reopen_after),
        )
        hostile.start()
        time.sleep(1.0)  # the sockets are open before the legitimate traffic starts
        threads = [
            threading.Thread(target=_legit, args=(base, h, legit_run, stop, seen)),
            threading.Thread(target=_renew, args=(base, h, leased, lease_id, args.lease, stop, seen)),
            threading.Thread(target=_healthz, args=(base, stop, seen)),
        ]
        for t in threads:
            t.start()
        for t in [*threads, hostile]:
            t.join()
        status = api.get(f"/api/v1/runs/{leased}").json()["status"]
        kind = "postgresql" if db else "sqlite"
        answers = ", ".join(f"{k} ×{v}" for k, v in sorted(seen.answers.items())) or "none"
        return (
            f"| {root.name or root} | {kind} | {n} | {len(seen.legit)} | "
            f"{1000 * _q(seen.legit, 0.5):.0f} / {1000 * _q(seen.legit, 0.95):.0f} / "
            f"{1000 * max(seen.legit, default=float('nan')):.0f} | {seen.shed} | {seen.errors} | "
            f"{seen.renewals_shed} | {status} | "
            f"{1000 * _q(seen.healthz, 0.5):.0f} / {1000 * _q(seen.healthz, 0.99):.0f} / "
            f"{1000 * max(seen.healthz, default=0):.0f} | {seen.reopened} | {answers} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roots", default=str(REPO), help="comma-separated checkouts (this one, an older worktree)")
    ap.add_argument("--databases", default="sqlite,postgresql")
    ap.add_argument("--admin-url", default=ADMIN_URL)
    ap.add_argument("--counts", default="8,64,512")
    ap.add_argument("--hold", type=float, default=60.0, help="seconds the sockets are held")
    ap.add_argument("--reopen-after", type=float, default=1.0, help="seconds before a closed socket is reopened")
    ap.add_argument("--target", choices=sorted(HOSTILE_PATHS), default="register", help="the hostile heads' route")
    ap.add_argument("--lease", type=float, default=10.0, help="the worker's lease, seconds")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 8192)), hard))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {platform.processor() or ''}")
    print(f"# {' '.join(sys.argv)}  (reopen after {args.reopen_after} s, heads to {HOSTILE_PATHS[args.target]})")
    print(
        "| server | database | sockets | legit POSTs | legit p50 / p95 / max ms | legit shed | legit errors | "
        "lease renewals shed | leased run at the end | /healthz p50 / p99 / max ms | sockets reopened | "
        "answers to the hostile sockets |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for root in [Path(r).resolve() for r in args.roots.split(",")]:
        for kind in args.databases.split(","):
            for n in [int(c) for c in args.counts.split(",")]:
                with database(kind.strip(), args.admin_url) as db:
                    print(case(root, db, n, args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
