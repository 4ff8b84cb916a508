"""Reading curves from CSV files (stdlib csv + numpy), with errors a person can act on."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rl_core.scaling.model import FloatArray

#: Compute columns tried in order when none is named: a real compute unit first, then proxies, then the step.
COMPUTE_COLUMNS = (
    "gpu_hours",
    "compute",
    "train_device_hours",
    "device_hours",
    "cum_time_s",
    "cum_total_tokens",
    "cum_response_tokens_est",
    "train_flops",
    "flops",
    "wall_seconds",
    "step",
)
#: Metric columns tried first when none is named (the engine's and the service's name for the validation pass rate).
PASS_RATE_COLUMNS = ("pass_rate", "eval_pass_rate", "val_pass_rate")


class CurveFileError(ValueError):
    """A CSV that cannot be read as a curve; the message says what is wrong and what is allowed."""


@dataclass(frozen=True)
class CurveTable:
    """All numeric columns of a CSV by name, plus the header order."""

    path: Path
    columns: tuple[str, ...]
    values: dict[str, FloatArray]

    def column(self, name: str) -> FloatArray:
        if name not in self.values:
            allowed = ", ".join(self.columns)
            raise CurveFileError(f"{self.path.name}: no column {name!r}; columns are: {allowed}")
        return self.values[name]

    def default_x(self) -> str:
        """The compute column used when none is named (first of :data:`COMPUTE_COLUMNS` present, else column 1)."""
        return next((c for c in COMPUTE_COLUMNS if c in self.values), self.columns[0])

    def default_y(self) -> str:
        """The metric column used when none is named: a pass-rate column (:data:`PASS_RATE_COLUMNS`) if present, else
        the first column that is not a compute column."""
        for c in (*PASS_RATE_COLUMNS, *self.columns):
            if c in self.values and c not in COMPUTE_COLUMNS:
                return c
        raise CurveFileError(f"{self.path.name}: no metric column besides the compute columns")


def _parse(text: str, path: Path, row: int, column: str) -> float:
    if text.strip() == "":
        return float("nan")  # a metric not logged at this step: dropped (and reported) by the fit
    try:
        return float(text)
    except ValueError:
        raise CurveFileError(f"{path.name}: row {row}, column {column!r}: {text!r} is not a number") from None


def read_curve_table(path: str | Path, needed: tuple[str, ...] = ()) -> CurveTable:
    """Read a CSV with a header row. Only the ``needed`` columns must be numeric (all columns when empty)."""
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            rows = list(reader)
    except FileNotFoundError:
        raise CurveFileError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CurveFileError(f"{p}: cannot read: {exc}") from None
    if not header or not any(h.strip() for h in header):
        raise CurveFileError(f"{p.name}: empty file (expected a header row and data rows)")
    header = [h.strip() for h in header]
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise CurveFileError(f"{p.name}: no data rows under the header")
    wanted = needed or tuple(header)
    for name in wanted:
        if name not in header:
            raise CurveFileError(f"{p.name}: no column {name!r}; columns are: {', '.join(header)}")
    values: dict[str, FloatArray] = {}
    for name in header:
        j = header.index(name)
        cells = [r[j] if j < len(r) else "" for r in rows]
        if name in wanted:
            values[name] = np.array([_parse(c, p, i + 2, name) for i, c in enumerate(cells)], dtype=np.float64)
        else:
            try:
                values[name] = np.array([float(c) if c.strip() else np.nan for c in cells], dtype=np.float64)
            except ValueError:
                continue  # a non-numeric column nobody asked for
    return CurveTable(path=p, columns=tuple(h for h in header if h in values), values=values)
