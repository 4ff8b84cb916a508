"""What stalls or bloats the service, against a real server process on 127.0.0.1 (SQLite by default; ``--database``
a PostgreSQL URL): oversized single bodies and concurrent cases. For each: the answers, how long they
took, the slowest ``/healthz`` answered meanwhile (polled every 20 ms) and the server's RSS growth. Only 127.0.0.1 is
ever contacted (the webhook receiver is a local thread).

    .venv/bin/python bench/stall.py [--database postgresql://...] [--root OLDER_CHECKOUT] [--cases yaml16,reach,...]

Cases: ``single`` (the oversized bodies), ``yaml16``/``yaml48`` (that many concurrent 250 KB YAML grids), ``recs`` (the
recommendations POST on a 60-run grid of 800 points a run, with ingestion to another run meanwhile), ``reach``
(``/reach`` on a 200k-point run), ``webhook`` (the test button against a receiver that answers in 3 s, ingestion
meanwhile), ``answers`` (a 16,000-character phrase x 4,096 runs: answer sizes), ``rejected`` (10,000 invalid
points), ``sse`` (one client's POSTs in 8 s of ingestion without and with 200 open event streams, and
the ratio).
"""

from __future__ import annotations

import argparse
import http.server
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from bench_server import REPO, bench_server
from bench_timing import run_threads

ALL = "single,yaml16,yaml48,recs,reach,webhook,answers,rejected,sse"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system) used by process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _q(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))] if ys else float("nan")


class Watch:
    """Polls /healthz every 20 ms and the server's RSS while the ``with`` body runs."""

    def __init__(self, base: str, pid: int) -> None:
        self.base, self.pid = base, pid
        self.healthz: list[float] = []
        self.rss0 = rss_mb(pid)
        self.rss_max = self.rss0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        with httpx.Client(timeout=120) as c:
            while not self._done.is_set():
                t = time.perf_counter()
                c.get(f"{self.base}/healthz")
                self.healthz.append(time.perf_counter() - t)
                self.rss_max = max(self.rss_max, rss_mb(self.pid))
                time.sleep(0.02)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()

    def cells(self) -> str:
        return (
            f"{1000 * max(self.healthz, default=0):.0f} | {1000 * _q(self.healthz, 0.5):.0f} | "
            f"{self.rss_max - self.rss0:+.0f}"
        )


def _send(c: httpx.Client, method: str, url: str, **kw: Any) -> tuple[httpx.Response, int]:
    """Send, resending after ``Retry-After`` on a 503 that carries it (as the Reporter and the worker do)."""
    shed = 0
    while True:
        r = c.request(method, url, **kw)
        if r.status_code == 503 and r.headers.get("retry-after") and shed < 50:
            shed += 1
            time.sleep(float(r.headers["retry-after"]))
            continue
        return r, shed


def _parallel(n: int, work: Callable[[int], Any]) -> list[Any]:
    out: list[Any] = [None] * n

    def one(i: int) -> None:
        out[i] = work(i)

    run_threads(threading.Thread(target=one, args=(i,)) for i in range(n))
    return out


def _points(first: int, n: int, every: int = 10, total: int = 200_000) -> list[dict[str, Any]]:
    return [
        {
            "step": i,
            "compute": float(i + 1),
            **({"pass_rate": 0.2 + 0.5 * min(i, total) / total} if i % every == 0 else {}),
        }
        for i in range(first, first + n)
    ]


def _seed(api: httpx.Client, run_id: int, n: int) -> None:
    for start in range(0, n, 10_000):
        _send(api, "POST", f"/api/v1/runs/{run_id}/metrics", json={"points": _points(start, min(10_000, n - start))})


def _ingest_during(api: httpx.Client, run_id: int, busy: threading.Thread, first_step: int) -> list[float]:
    """Post 5-point batches to ``run_id`` every 50 ms while ``busy`` runs; their round trips."""
    times, step = [], first_step
    while busy.is_alive():
        t = time.perf_counter()
        _send(api, "POST", f"/api/v1/runs/{run_id}/metrics", json={"points": _points(step, 5)})
        times.append(time.perf_counter() - t)
        step += 5
        time.sleep(0.05)
    return times


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    return thread, out


# ---- cases ------------------------------------------------------------------------------------------------------


def case_single(base: str, h: dict[str, str], pid: int) -> list[str]:
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    doc = {"name": "s", "task": "t", "model": "tiny", "budget": 1.0, "grid": {"batch.prompts": [8, 16]}}
    run_id = api.post("/api/v1/experiments", json=doc).json()["runs"][0]["id"]
    axis = ", ".join(f"{i * 1e-6:.8f}" for i in range(18_000))
    cases = [
        ("metrics: 2.6M empty points (7.8 MB)", f"/api/v1/runs/{run_id}/metrics",
         b'{"points":[' + b",".join([b"{}"] * 2_600_000) + b"]}", "application/json"),
        ("YAML grid, 250 KB axis (dry run)", "/api/v1/experiments?dry_run=true",
         f"name: y\ntask: t\nmodel: m\nbudget: 1\ngrid:\n  optimizer.lr: [{axis}]\n".encode(), "application/yaml"),
        ("YAML grid, 7 MB", "/api/v1/experiments",
         b"name: y\ntask: t\nmodel: m\nbudget: 1\ngrid:\n  a: [" + b"1, " * 2_400_000 + b"]\n", "application/yaml"),
        ("JSON grid, 3.9M-value axis", "/api/v1/experiments?dry_run=true",
         b'{"name":"j","task":"t","model":"m","budget":1,"grid":{"a":[' + b",".join([b"1"] * 3_900_000) + b"]}}",
         "application/json"),
    ]  # fmt: skip
    lines = []
    for name, path, body, ctype in cases:
        with Watch(base, pid) as w:
            t = time.perf_counter()
            r = api.post(path, content=body, headers={"Content-Type": ctype})
            took = time.perf_counter() - t
        lines.append(f"| {name} | {r.status_code} | {took:.2f} | {w.cells()} |")
    return lines


def _yaml_doc(i: int) -> bytes:
    axis = ", ".join(f"{k * 1e-6:.8f}" for k in range(20_800))
    return f"name: y{i}\ntask: t\nmodel: tiny\nbudget: 1\ngrid:\n  optimizer.lr: [{axis}]\n".encode()


def case_yaml(n: int) -> Callable[[str, dict[str, str], int], list[str]]:
    def run(base: str, h: dict[str, str], pid: int) -> list[str]:
        bodies = [_yaml_doc(i) for i in range(n)]
        headers = {**h, "Content-Type": "application/yaml"}
        with Watch(base, pid) as w, httpx.Client(timeout=300) as c:
            t0 = time.perf_counter()

            def one(i: int) -> tuple[int, int, float]:
                r, shed = _send(c, "POST", f"{base}/api/v1/experiments", content=bodies[i], headers=headers)
                return r.status_code, shed, time.perf_counter() - t0

            answers = _parallel(n, one)
        statuses = Counter(s for s, _, _ in answers)
        shed = sum(s for _, s, _ in answers)
        last = max(t for _, _, t in answers)
        what = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())) + f" (503s resent: {shed})"
        return [f"| {n} concurrent 250 KB YAML grids ({n * 250 // 1000} MB) | {what} | {last:.2f} | {w.cells()} |"]

    return run


def case_recs(base: str, h: dict[str, str], pid: int, runs: int = 60, points: int = 800) -> list[str]:
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    doc = {"name": "recs", "task": "t", "model": "tiny", "budget": 1e9, "max_runs": runs,
           "grid": {"batch.prompts": list(range(8, 8 + runs))}}  # fmt: skip
    exp = api.post("/api/v1/experiments", json=doc, params={"runs_limit": runs}).json()
    for r in exp["runs"]:
        _seed(api, r["id"], points)
    other = api.post("/api/v1/runs", json={"name": "elsewhere"}).json()["id"]
    before = [time.perf_counter()]
    base_times = []
    for step in range(0, 100, 5):  # ingestion alone, for comparison
        t = time.perf_counter()
        _send(api, "POST", f"/api/v1/runs/{other}/metrics", json={"points": _points(step, 5)})
        base_times.append(time.perf_counter() - t)
    del before
    with Watch(base, pid) as w:
        t0 = time.perf_counter()
        busy, out = _in_thread(lambda: _send(api, "POST", f"/api/v1/experiments/{exp['id']}/recommendations")[0])
        during = _ingest_during(api, other, busy, 1000)
        busy.join()
        took = time.perf_counter() - t0
    return [
        f"| recommendations POST, {runs} runs x {points} points | {out[0].status_code} | {took:.2f} | {w.cells()} | "
        f"ingestion to another run meanwhile: p50 {1000 * _q(during, 0.5):.0f} ms, max "
        f"{1000 * max(during, default=0):.0f} ms ({len(during)} POSTs; alone p50 {1000 * _q(base_times, 0.5):.0f} ms) |"
    ]


def case_reach(base: str, h: dict[str, str], pid: int, points: int = 200_000) -> list[str]:
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    run = api.post("/api/v1/runs", json={"name": "long"}).json()["id"]
    _seed(api, run, points)
    time.sleep(3)  # let the point fit settle
    lines = []
    for attempt in ("first", "second"):
        with Watch(base, pid) as w:
            t0 = time.perf_counter()
            r = api.get(f"/api/v1/runs/{run}/reach", params={"target": 0.6})
            took = time.perf_counter() - t0
            pending = r.json().get("fit_pending", False)
            until = float("nan")
            if pending:  # the fit was queued: how long until an answer carries it
                while time.perf_counter() - t0 < 120 and api.get(
                    f"/api/v1/runs/{run}/reach", params={"target": 0.6}
                ).json().get("fit_pending"):
                    time.sleep(0.2)
                until = time.perf_counter() - t0
        lines.append(
            f"| /reach on a {points // 1000}k-point run ({attempt} call) | {r.status_code}"
            f"{' fit_pending' if pending else ''} | {took:.2f} | {w.cells()} | "
            + (f"fit answered after {until:.1f} s |" if pending else "answered with the fit |")
        )
    return lines


class _SlowReceiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(3.0)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def case_webhook(base: str, h: dict[str, str], pid: int) -> list[str]:
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowReceiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        hook = api.post(
            "/api/v1/alerts/webhooks", json={"name": "slow", "url": f"http://127.0.0.1:{receiver.server_port}/x"}
        ).json()["id"]
        run = api.post("/api/v1/runs", json={"name": "w"}).json()["id"]
        with Watch(base, pid) as w:
            t0 = time.perf_counter()
            busy, out = _in_thread(lambda: api.post(f"/api/v1/alerts/webhooks/{hook}/test"))
            during = _ingest_during(api, run, busy, 0)
            busy.join()
            took = time.perf_counter() - t0
    finally:
        receiver.shutdown()
    return [
        f"| webhook test, receiver answers in 3 s | {out[0].status_code} ok={out[0].json().get('ok')} | {took:.2f} | "
        f"{w.cells()} | ingestion meanwhile: p50 {1000 * _q(during, 0.5):.0f} ms, max "
        f"{1000 * max(during, default=0):.0f} ms |"
    ]


def case_answers(base: str, h: dict[str, str], pid: int) -> list[str]:
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    doc = {"name": "amplify", "task": "t", "model": "tiny", "budget": 1.0, "max_runs": 4096,
           "recipe": {"length": {"interruption": {"phrase": "p" * 16_000}}},
           "grid": {"batch.prompts": list(range(8, 72)), "optimizer.lr": [1e-6 * i for i in range(1, 65)]}}  # fmt: skip
    lines = []
    with Watch(base, pid) as w:
        t0 = time.perf_counter()
        r = api.post("/api/v1/experiments", json=doc, params={"runs_limit": 4096})
        took = time.perf_counter() - t0
    exp = r.json()["id"]
    lines.append(f"| grid: 16,000-char phrase x 4,096 runs, created | {r.status_code}, {len(r.content) / 1e6:.1f} MB "
                 f"| {took:.2f} | {w.cells()} |")  # fmt: skip
    for path in (f"/api/v1/experiments/{exp}?runs_limit=10000", f"/api/v1/runs?experiment_id={exp}&limit=10000"):
        with Watch(base, pid) as w:
            t0 = time.perf_counter()
            r = api.get(path)
            took = time.perf_counter() - t0
        lines.append(f"| GET {path.split('?')[0]}?{path.split('?')[1].split('&')[-1]} | {r.status_code}, "
                     f"{len(r.content) / 1e6:.1f} MB | {took:.2f} | {w.cells()} |")  # fmt: skip
    with Watch(base, pid) as w, httpx.Client(base_url=base, headers=h, timeout=300) as c:
        t0 = time.perf_counter()
        sizes = _parallel(4, lambda _: len(c.get(f"/api/v1/experiments/{exp}?runs_limit=10000").content))
        took = time.perf_counter() - t0
    lines.append(f"| 4 of those GETs at once | {sum(sizes) / 1e6:.1f} MB | {took:.2f} | {w.cells()} |")
    return lines


def case_rejected(base: str, h: dict[str, str], pid: int) -> list[str]:
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    run = api.post("/api/v1/runs", json={"name": "bad"}).json()["id"]
    bad = [{"step": i, "compute": -1.0, "pass_rate": 2.0} for i in range(10_000)]
    with Watch(base, pid) as w:
        t0 = time.perf_counter()
        r = api.post(f"/api/v1/runs/{run}/metrics", json={"points": bad})
        took = time.perf_counter() - t0
    return [f"| 10,000 invalid points | {r.status_code}, {len(r.content) / 1000:.0f} KB | {took:.2f} | {w.cells()} |"]


def case_sse(base: str, h: dict[str, str], pid: int, streams: int = 200, tokens: int = 4, rounds: int = 2) -> list[str]:
    """One client ingests 20-point batches without pause, 8 s alone, then 8 s with ``streams`` open event streams of
    its experiment (read by another process; ``tokens`` read tokens share them), ``rounds`` times in turn (the
    machine's other load drifts): its POSTs in each window, and the ratio of the sums."""
    api = httpx.Client(base_url=base, headers=h, timeout=300)
    doc = {"name": "sse", "task": "t", "model": "tiny", "budget": 1e9, "grid": {"batch.prompts": [8, 16]}}
    exp = api.post("/api/v1/experiments", json=doc).json()
    run = exp["runs"][0]["id"]
    url = f"{base}/api/v1/experiments/{exp['id']}/events"
    secrets = [
        api.post("/api/v1/tokens", json={"name": f"viewer{i}", "scopes": ["read"]}).json()["token"]
        for i in range(tokens)
    ]
    step = 0

    def ingest() -> tuple[list[float], Watch, float]:
        nonlocal step
        times, stop, cpu0 = [], time.monotonic() + 8.0, cpu_s(pid)
        with Watch(base, pid) as w:
            while time.monotonic() < stop:
                t = time.perf_counter()
                _send(api, "POST", f"/api/v1/runs/{run}/metrics", json={"points": _points(step, 20)})
                times.append(time.perf_counter() - t)
                step += 20
        return times, w, cpu_s(pid) - cpu0

    lines, alone_sum, loaded_sum = [], 0, 0
    for _ in range(rounds):
        alone, w, cpu = ingest()
        alone_sum += len(alone)
        lines.append(
            f"| ingestion, no streams open | {len(alone)} POSTs, p95 {1000 * _q(alone, 0.95):.0f} ms | 8 | "
            f"{w.cells()} | /healthz p95 {1000 * _q(w.healthz, 0.95):.0f} ms; server CPU {cpu:.1f} s |"
        )
        with _Readers(url, secrets, streams) as readers:
            time.sleep(2.0)
            reader0 = readers.cpu()
            loaded, w, cpu = ingest()
            reader = readers.cpu() - reader0
        loaded_sum += len(loaded)
        lines.append(
            f"| ingestion, {streams} streams open ({readers.opened}; events read per stream min "
            f"{min(readers.counts, default=0)}, max {max(readers.counts, default=0)}) | {len(loaded)} POSTs, p95 "
            f"{1000 * _q(loaded, 0.95):.0f} ms | 8 | {w.cells()} | /healthz p95 {1000 * _q(w.healthz, 0.95):.0f} ms; "
            f"server CPU {cpu:.1f} s, stream reader {reader:.1f} s |"
        )
    lines.append(f"| one client's POSTs, {rounds} x 8 s each | {loaded_sum} with {streams} streams open, {alone_sum} "
                 f"without: {loaded_sum / max(1, alone_sum):.2f}x | | | | | |")  # fmt: skip
    return lines


class _Readers:
    """The streams, opened and read by another process (asyncio, raw socket reads: it costs little CPU and shares
    no GIL with the timed client) while the ``with`` body runs: :attr:`opened` (their answers' statuses) on entry,
    :attr:`counts` (events read per stream) on exit."""

    def __init__(self, url: str, secrets: list[str], streams: int) -> None:
        mp = multiprocessing.get_context("spawn")
        self._pipe, child = mp.Pipe()
        self._stop = mp.Event()
        self._process = mp.Process(target=_listen, args=(url, secrets, streams, self._stop, child), daemon=True)
        self.opened = ""
        self.counts: list[int] = []

    def __enter__(self) -> _Readers:
        self._process.start()
        self.opened = self._pipe.recv()  # every stream answered (or failed)
        return self

    def cpu(self) -> float:
        return cpu_s(self._process.pid or 0)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self.counts = self._pipe.recv()
        self._process.join(30)


def _listen(url: str, secrets: list[str], streams: int, stop: Any, report: Any) -> None:
    """``streams`` open event streams of one experiment (round robin over ``secrets``) on one asyncio loop, read raw
    and counted (``\nid: `` per event), until ``stop``; reports the answers' statuses once all arrived, then each
    stream's count of events."""
    import asyncio
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    async def one(i: int, counts: list[int], statuses: list[str], answered: asyncio.Event) -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            statuses[i] = type(exc).__name__
            answered.set()
            return
        writer.write(f"GET {parts.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                     f"Authorization: Bearer {secrets[i % len(secrets)]}\r\nAccept: text/event-stream\r\n\r\n"
                     .encode())  # fmt: skip
        head = await reader.readuntil(b"\r\n\r\n")
        statuses[i] = head.split(b" ", 2)[1].decode()
        answered.set()
        tail = b""
        try:
            while data := await reader.read(1 << 16):
                counts[i] += (tail + data).count(b"\nid: ")
                tail = data[-4:]  # an "\nid: " cut by a read boundary is counted once (a whole one never twice)
        except OSError:
            pass
        finally:
            writer.close()

    async def main() -> list[int]:
        counts, statuses = [0] * streams, [""] * streams
        answered = asyncio.Event()
        tasks = [asyncio.create_task(one(i, counts, statuses, answered)) for i in range(streams)]
        while not all(statuses):
            await asyncio.wait_for(answered.wait(), 60)
            answered.clear()
        report.send(", ".join(f"{k}: {v}" for k, v in sorted(Counter(statuses).items())))
        while not stop.is_set():
            await asyncio.sleep(0.1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return counts

    report.send(asyncio.run(main()))


CASES: dict[str, Callable[[str, dict[str, str], int], list[str]]] = {
    "single": case_single,
    "yaml16": case_yaml(16),
    "yaml48": case_yaml(48),
    "recs": case_recs,
    "reach": case_reach,
    "webhook": case_webhook,
    "answers": case_answers,
    "rejected": case_rejected,
    "sse": case_sse,
}


@contextmanager
def _server(args: argparse.Namespace) -> Iterator[tuple[str, str, int]]:
    info: dict[str, Any] = {}
    os.environ["SCALERL_WEBHOOK_ALLOW_PRIVATE"] = "true"  # the receiver of the webhook case is local
    with bench_server(args.database, prefix="scalerl-stall-", root=args.root, info=info) as (base, token):
        yield base, token, int(info["pid"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--database", default="")
    ap.add_argument("--root", type=Path, default=REPO)
    ap.add_argument("--cases", default=ALL, help=f"comma-separated, of {ALL}")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, server from {args.root}, "
          f"{'PostgreSQL' if args.database else 'SQLite'}")  # fmt: skip
    print("| case | answers | answered in s | slowest /healthz ms | p50 /healthz ms | server RSS growth MB | notes |")
    print("|---|---|---|---|---|---|---|")
    for name in args.cases.split(","):
        with _server(args) as (base, token, pid):  # a fresh server per case: RSS growth and locks are its own
            for line in CASES[name](base, {"Authorization": f"Bearer {token}"}, pid):
                print(line, flush=True)


if __name__ == "__main__":
    main()
