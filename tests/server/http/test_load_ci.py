"""The short version of the load benchmark (bench/load.py --ci): 10 runs of one grid and a 20k-point run posting for
5 s against a real server on each database, with a burst of 16 concurrent 250 KB YAML grids one second in; fails on
a 5xx, a lost point or a /healthz answer over 1 s (the burst stalled it for 2.6-5.4 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.conftest import _pg_available
from tests.services import unavailable

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.mark.process
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_the_short_load_benchmark_has_no_5xx_and_loses_no_point(database: str) -> None:
    if database == "postgresql" and (reason := _pg_available()):
        unavailable(reason)
    done = subprocess.run(
        [sys.executable, "load.py", "--ci", "--databases", database],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    header = [c.strip() for c in next(line for line in lines if line.startswith("| database")).split("|")]
    row = [c.strip() for c in lines[-1].split("|")]
    assert row[header.index("5xx")] == "0" and row[header.index("lost points")] == "0", done.stdout
    slowest_healthz_ms = float(row[header.index("/healthz p50 / p99 / max ms")].split("/")[-1])
    assert slowest_healthz_ms < 1000, done.stdout
    assert row[header.index("YAML burst")] == "422: 16", done.stdout  # each refused by its list cap; none lost to 5xx
    # Every run's point fit caught up with its evaluations once the load stopped (off the request path).
    assert row[header.index("fits current after s")] != "nan", done.stdout
