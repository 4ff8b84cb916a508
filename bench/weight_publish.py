"""Trainer -> generator weight publishing: shared-memory tensors + version counter vs a pipe of state dicts.

For each model size, the trainer process publishes weights and a spawned reader process picks them up;
measured per update: the publisher's cost (what the trainer loses per step) and the latency until the reader
holds a complete copy. Usage: ``python bench/weight_publish.py``; prints a Markdown table last.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.multiprocessing as mp

from rl_core.engine.weights import SharedWeights

SIZES = {"tiny (0.1M)": 100_000, "small (0.8M)": 800_000, "25M": 25_000_000}
UPDATES = 10


def _state(n: int) -> dict[str, torch.Tensor]:
    per = max(1, n // 8)
    state = {f"w{i}": torch.randn(per) for i in range(8)}
    state["stamp"] = torch.zeros(1, dtype=torch.float64)  # publish time (float32 cannot hold a Unix time)
    return state


def _shared_reader(shared: SharedWeights, done: Any, out: Any) -> None:
    torch.set_num_threads(1)
    staging = {k: torch.empty_like(v) for k, v in shared.tensors.items()}
    seen = shared.version
    lat = []
    while seen < UPDATES:
        v = shared.version
        if v != seen:
            seen = shared.read_into(staging)
            lat.append(time.time() - float(staging["stamp"][0]))
    out.put(lat)
    done.wait()


def _pipe_reader(q: Any, out: Any) -> None:
    torch.set_num_threads(1)
    lat = []
    for _ in range(UPDATES):
        state = q.get()
        lat.append(time.time() - float(state["stamp"][0]))
    out.put(lat)


def bench(n: int) -> tuple[float, float, float, float]:
    ctx = mp.get_context("spawn")
    state = _state(n)
    shared = SharedWeights(state, version=0, ctx=ctx)
    out, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_shared_reader, args=(shared, done, out))
    p.start()
    time.sleep(3)
    pub = []
    for v in range(1, UPDATES + 1):
        state["stamp"][0] = time.time()
        t0 = time.perf_counter()
        shared.publish(state, v)
        pub.append(time.perf_counter() - t0)
        time.sleep(0.2)
    lat_shared = out.get()
    done.set()
    p.join()
    q, out2 = ctx.Queue(), ctx.Queue()
    p2 = ctx.Process(target=_pipe_reader, args=(q, out2))
    p2.start()
    time.sleep(3)
    pub2 = []
    for _ in range(UPDATES):
        state["stamp"][0] = time.time()
        t0 = time.perf_counter()
        q.put({k: v.clone() for k, v in state.items()})
        pub2.append(time.perf_counter() - t0)
        time.sleep(0.2)
    lat_pipe = out2.get()
    p2.join()
    med = lambda xs: sorted(xs)[len(xs) // 2] * 1e3  # noqa: E731
    return med(pub), med(lat_shared), med(pub2), med(lat_pipe)


def main() -> None:
    torch.set_num_threads(1)
    rows = [(name, *bench(n)) for name, n in SIZES.items()]
    print("| weights | shared memory: publish ms | shared memory: latency ms | pipe: publish ms | pipe: latency ms |")
    print("|---|---|---|---|---|")
    for name, a, b, c, d in rows:
        print(f"| {name} | {a:.2f} | {b:.2f} | {c:.2f} | {d:.2f} |")


if __name__ == "__main__":
    main()
