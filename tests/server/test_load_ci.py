"""The short version of the load benchmark (bench/load.py --ci): 10 runs of one grid and a 20k-point run posting for
5 s against a real server on each database; fails on a 5xx or a lost point (issue 40)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.conftest import _pg_available
from tests.services import unavailable

BENCH = Path(__file__).resolve().parents[2] / "bench"


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
    # Every run's point fit caught up with its evaluations once the load stopped (off the request path).
    assert row[header.index("fits current after s")] != "nan", done.stdout
