"""Names of imported runs, and the ceiling as ``scalerl import`` and ``scalerl watch`` print it.

Two sources in one ``scalerl import`` whose runs have one name (``bad.jsonl`` and ``bad.csv`` are both run ``bad``)
would be one run on the service and one ``--csv-out`` file; they are told apart by their source's suffix
(``bad-jsonl``, ``bad-csv``), or refused when that does not tell them apart.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def distinct_names(runs: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """``(source label, run name)`` pairs -> (the run names to use, in order; notes on the renamed ones). A name
    shared by runs of different sources gets its source's suffix (``bad`` from ``bad.jsonl`` -> ``bad-jsonl``) when
    that makes every run of that name unique; otherwise the names are left as they are (the caller refuses them)."""
    by_name: dict[str, set[str]] = {}
    for label, name in runs:
        by_name.setdefault(name, set()).add(label)
    out: list[str] = []
    notes: list[str] = []
    for label, name in runs:
        labels = by_name[name]
        suffixes = {Path(lb).suffix.lstrip(".").lower() for lb in labels}
        if len(labels) > 1 and len(suffixes) == len(labels) and all(suffixes):
            new = f"{name}-{Path(label).suffix.lstrip('.').lower()}"
            notes.append(f"{label}: run {name!r} imported as {new!r} (another source has a run of that name)")
            out.append(new)
        else:
            out.append(name)
    return out, notes


def ceiling_text(fit: Mapping[str, Any] | None) -> str:
    """``A=0.661 [0.598, 0.712] (80%, full fit of 40 points)`` from a fit snapshot's ``fit`` (``GET /runs/{id}``'s
    ``fit``/``forecast``), or ``A=0.661 (no interval yet: ...)`` from a fast fit without one."""
    if not fit or fit.get("A") is None:
        return "no forecast yet"
    a = float(fit["A"])
    band = (fit.get("ci") or {}).get("A")
    if band and band[0] is not None and band[1] is not None:
        level = fit.get("level")
        lvl = f"{float(level):.0%}, " if level is not None else ""
        return f"A={a:.3f} [{float(band[0]):.3f}, {float(band[1]):.3f}] ({lvl}{fit.get('n_points')} points)"
    return f"A={a:.3f} (no interval yet: the fit with intervals has not run on these points)"


def current_ceiling(api: Any, run_id: int, wait: float = 0.0) -> tuple[str, str | None]:
    """(the ceiling text, the fit's status) of a run's newest fit with intervals (``forecast``) when it has seen as
    many points as its newest fast fit (``fit``), else of the fast fit; waits up to ``wait`` s for such a one."""
    deadline = time.monotonic() + wait
    while True:
        run = api.get_run(run_id)
        point = (run.get("fit") or {}).get("fit")
        full = (run.get("forecast") or {}).get("fit")
        current = full is not None and (point is None or (full.get("n_points") or 0) >= (point.get("n_points") or 0))
        if current or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if current or point is None:
        return ceiling_text(full), None if full is None else full.get("status")
    text = ceiling_text(point)
    band = ((full or {}).get("ci") or {}).get("A")
    if full is not None and band and band[0] is not None and band[1] is not None and point.get("A") is not None:
        text = (
            f"A={float(point['A']):.3f} ({point.get('n_points')} points; the last fit with intervals, of "
            f"{full.get('n_points')} points: A={float(full['A']):.3f} [{float(band[0]):.3f}, {float(band[1]):.3f}])"
        )
    return text, point.get("status")
