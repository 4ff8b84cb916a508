"""Reading curves from CSV files (stdlib csv + numpy), with errors a person can act on.

Files: UTF-8 text (a BOM is dropped), a header row of column names first, comma-separated (tab- or
semicolon-separated when the header row has no comma); JSON, Parquet, binary files and a first row of numbers are
errors that say so.

Column rules (``scalerl fit``, ``backtest`` and ``replay`` share them):

- a name heading two columns is an error when that column is used (which one is meant is unknown);
- names match case-insensitively (an exact match wins); a W&B export's ``"run - eval/pass_rate"`` is known by its
  metric part (``eval/pass_rate``, i.e. ``eval_pass_rate``);
- the x and y columns are never the same column;
- W&B's ``__MIN``/``__MAX`` companion columns, W&B internal columns (``_runtime``, ``_timestamp``) and time stamps
  (``Wall time``) are never chosen as y by default;
- a column with any non-numeric cell is text: ignored unless asked for, and asking for it is an error;
- the y column is a pass rate: values in [0, 1] are used as they are, values in [0, 100] reaching above 1 are
  percentages and are divided by 100 (with a note), anything else is an error.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rl_core.scaling.fit.model import FloatArray

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
#: Time stamps: never a default y.
TIME_COLUMNS = ("wall_time", "timestamp", "time", "runtime", "created")

_WANDB_RUN_PREFIX = re.compile(r"^.* - (?=\S)")
_COMPANION = re.compile(r"__(min|max)$", re.IGNORECASE)


class CurveFileError(ValueError):
    """A CSV that cannot be read as a curve; the message says what is wrong and what is allowed."""


def column_key(name: str) -> str:
    """The name a column is recognised by: lower case, a W&B ``"RUN - "`` prefix and leading underscores dropped,
    ``/``, ``-``, ``.`` and spaces as ``_`` (``"run - eval/pass_rate"``: ``eval_pass_rate``)."""
    key = _WANDB_RUN_PREFIX.sub("", name.strip()).lower()
    return re.sub(r"[\s/.\-]+", "_", key).lstrip("_")


def _is_companion(name: str) -> bool:
    return _COMPANION.search(name.strip()) is not None


def _by_key(columns: list[str]) -> dict[str, str]:
    """Key -> first column with that :func:`column_key`, then -> first column whose last ``/`` part has that key
    (``train/gpu_hours`` is known as ``gpu_hours`` unless a column is named so)."""
    found: dict[str, str] = {}
    for c in columns:
        found.setdefault(column_key(c), c)
    for c in columns:
        found.setdefault(column_key(c.rsplit("/", 1)[-1]), c)
    return found


@dataclass(frozen=True)
class Curve:
    """The two columns of one curve: ``x`` (compute) and ``y`` (a pass rate in [0, 1]); ``x_column != y_column``.
    ``notes`` say what was changed on the way (a percentage divided by 100)."""

    x_column: str
    y_column: str
    x: FloatArray
    y: FloatArray
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CurveTable:
    """All numeric columns of a CSV by name, in header order. ``text`` holds the columns left out because a cell is
    not a number (name -> which cell): they are never chosen by default, and naming one is an error."""

    path: Path
    columns: tuple[str, ...]
    values: dict[str, FloatArray]
    text: dict[str, str] = field(default_factory=dict)
    header: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    """Names that head more than one column: only the first is kept, and choosing one is an error (which of the
    columns is meant is unknown)."""

    def _unique(self, name: str) -> str:
        if name in self.duplicates:
            raise CurveFileError(
                f"{self.path.name}: the header names {name!r} more than once; rename the copies so that one "
                "column has that name"
            )
        return name

    def resolve(self, name: str) -> str:
        """The numeric column ``name`` means: an exact match, else the one column equal ignoring case."""
        if name in self.values:
            return self._unique(name)
        found = [c for c in self.columns if c.lower() == name.strip().lower()]
        if len(found) == 1:
            return self._unique(found[0])
        if len(found) > 1:
            raise CurveFileError(f"{self.path.name}: {name!r} matches several columns: {', '.join(found)}")
        text = [c for c in self.text if c.lower() == name.strip().lower()]
        if text:
            raise self._text_error(text[0])
        raise CurveFileError(f"{self.path.name}: no column {name!r}; {self._listing()}")

    def _text_error(self, name: str) -> CurveFileError:
        return CurveFileError(f"{self.path.name}: column {name!r} holds text, not numbers ({self.text[name]})")

    def _listing(self) -> str:
        text = f" (text, ignored: {', '.join(self.text)})" if self.text else ""
        return f"numeric columns are: {', '.join(self.columns) or '(none)'}{text}"

    def _known(self, name: str) -> str:
        """A column found by its key: numeric, or an error when the best match is a text column."""
        if name in self.text:
            raise self._text_error(name)
        return name

    def _candidates(self, avoid: str | None) -> list[str]:
        """Numeric and text columns in header order, without ``avoid`` and W&B companion columns."""
        return [c for c in self.header if (c in self.values or c in self.text) and c != avoid and not _is_companion(c)]

    def column(self, name: str) -> FloatArray:
        return self.values[self.resolve(name)]

    def default_x(self, avoid: str | None = None) -> str:
        """The compute column used when none is named: the first of :data:`COMPUTE_COLUMNS` present (by
        :func:`column_key`, or by the last ``/`` part), else the first numeric column; never ``avoid`` nor a W&B
        companion column. A compute column holding text is an error, not skipped."""
        candidates = self._candidates(avoid)
        by_key = _by_key(candidates)
        known = next((by_key[k] for k in COMPUTE_COLUMNS if k in by_key), None)
        if known is not None:
            return self._known(known)
        numeric = [c for c in candidates if c in self.values]
        if not numeric:
            raise CurveFileError(f"{self.path.name}: no numeric column for x; {self._listing()}")
        return numeric[0]

    def default_y(self, avoid: str | None = None) -> str:
        """The metric column used when none is named (never ``avoid``, by default the x column): a pass-rate column
        (:data:`PASS_RATE_COLUMNS`) if present, else the first numeric column that is not a compute column, a W&B
        companion, a W&B internal column or a time stamp. A pass-rate column holding text is an error."""
        avoid = self.default_x() if avoid is None else avoid
        candidates = self._candidates(avoid)
        by_key = _by_key(candidates)
        for key in PASS_RATE_COLUMNS:
            if key in by_key:
                return self._known(by_key[key])
        for c in candidates:
            key = column_key(c)
            if c in self.values and key not in COMPUTE_COLUMNS + TIME_COLUMNS and not c.startswith("_"):
                return c
        raise CurveFileError(f"{self.path.name}: no metric column besides the compute columns; {self._listing()}")

    def curve(self, x: str | None = None, y: str | None = None) -> Curve:
        """The curve of columns ``x`` and ``y`` (defaults: :meth:`default_x`, :meth:`default_y`), y as a pass rate."""
        yc = self.resolve(y) if y else None
        xc = self.resolve(x) if x else self.default_x(avoid=yc)
        yc = yc or self.default_y(avoid=xc)
        if xc == yc:
            raise CurveFileError(f"{self.path.name}: the x and y columns are both {xc!r}; name two columns")
        self._unique(xc)
        self._unique(yc)
        ys, notes = as_pass_rate(self.values[yc], f"{self.path.name}: column {yc!r}")
        same = [c for c in self.columns if c not in (xc, yc) and not _is_companion(c) and _same_metric(c, yc)]
        if y is None and same:
            notes += (f"y is the first of {len(same) + 1} {column_key(yc)!r} columns; the others (--y): {same}",)
        return Curve(xc, yc, self.values[xc], ys, notes)


def _same_metric(a: str, b: str) -> bool:
    return column_key(a) == column_key(b)


def as_pass_rate(values: FloatArray, what: str) -> tuple[FloatArray, tuple[str, ...]]:
    """``values`` as pass rates in [0, 1]: unchanged when they are, divided by 100 (with a note) when they lie in
    [0, 100] and reach above 1 (a percentage); otherwise :class:`CurveFileError`."""
    finite = values[np.isfinite(values)]
    if finite.size == 0 or (finite.min() >= 0.0 and finite.max() <= 1.0):
        return values, ()
    lo, hi = float(finite.min()), float(finite.max())
    if lo >= 0.0 and hi <= 100.0:
        return values / 100.0, (f"{what} holds values up to {hi:g}: read as percentages (divided by 100)",)
    raise CurveFileError(
        f"{what} holds values from {lo:g} to {hi:g}: not a pass rate in [0, 1] nor a percentage in [0, 100]"
    )


def _is_number(cell: str) -> bool:
    """A cell that holds a number (``nan``/``inf`` included); Python's ``1_000`` is not one (no CSV writer means
    1000 by it)."""
    if "_" in cell:
        return False
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _first_text(cells: list[str]) -> tuple[int, str] | None:
    """(row, cell) of the first cell that is not a number (rows counted from 2: the header is row 1)."""
    for i, c in enumerate(cells):
        if c.strip() and not _is_number(c):
            return i + 2, c
    return None


def _read_text(p: Path) -> str:
    """The file's text (UTF-8, a BOM dropped); a file that is not CSV text (Parquet, JSON, binary) is an error."""
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise CurveFileError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise CurveFileError(f"{p}: is a directory, not a CSV file") from None
    except OSError as exc:
        raise CurveFileError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if raw.startswith(b"PAR1"):
        raise CurveFileError(f"{p.name}: a Parquet file, not a CSV; export it as CSV (comma-separated, a header row)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CurveFileError(
            f"{p.name}: not UTF-8 text (byte {exc.start}); expected a CSV file (comma-separated, a header row) "
            "saved as UTF-8"
        ) from None
    if text.lstrip()[:1] in ("{", "["):
        raise CurveFileError(
            f"{p.name}: JSON, not a CSV (comma-separated, a header row); "
            f"`scalerl import {p.name} --csv-out DIR` converts JSON lines to CSV"
        )
    return text


def _delimiter(first_line: str) -> str:
    """``,``; a tab or ``;`` when the header row has no comma but those (TSV, a spreadsheet's semicolon CSV)."""
    if "," not in first_line:
        for d in ("\t", ";"):
            if d in first_line:
                return d
    return ","


def read_curve_table(path: str | Path, needed: tuple[str, ...] = ()) -> CurveTable:
    """Read a CSV with a header row (comma-separated; tab- or semicolon-separated when the header row has no
    comma). A column with a cell that is not a number is text (left out, see :class:`CurveTable`); the ``needed``
    columns (matched as :meth:`CurveTable.resolve` does) must be numeric. A header row of numbers (no header) and a
    name heading two columns are errors (the latter only when that column is used)."""
    p = Path(path)
    text = _read_text(p)
    end = text.find("\n")
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text[: end if end >= 0 else None]))
        header = next(reader, None)
        rows = list(reader)
    except csv.Error as exc:
        raise CurveFileError(f"{p}: cannot read: {exc}") from None
    if not header:
        raise CurveFileError(f"{p.name}: empty file (expected a header row and data rows)")
    if not any(h.strip() for h in header):
        raise CurveFileError(f"{p.name}: the first row has no column names (expected a header row, then data rows)")
    header = [h.strip() for h in header]
    if all(_is_number(h) for h in header if h):
        raise CurveFileError(
            f"{p.name}: the first row holds numbers ({', '.join(h for h in header if h)}), not column names; "
            "add a header row (e.g. gpu_hours,pass_rate)"
        )
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise CurveFileError(f"{p.name}: no data rows under the header")
    cells: dict[str, list[str]] = {}
    for j, name in enumerate(header):
        if name and name not in cells:  # a repeated name keeps its first column (see CurveTable.duplicates)
            cells[name] = [r[j] if j < len(r) else "" for r in rows]
    duplicates = tuple(dict.fromkeys(h for h in header if h and header.count(h) > 1))
    for name in needed:
        found = [h for h in cells if h == name] or [h for h in cells if h.lower() == name.strip().lower()]
        if not found:
            raise CurveFileError(f"{p.name}: no column {name!r}; columns are: {', '.join(cells)}")
        if len(found) > 1:
            raise CurveFileError(f"{p.name}: {name!r} matches several columns: {', '.join(found)}")
    values: dict[str, FloatArray] = {}
    text_columns: dict[str, str] = {}
    for name, column in cells.items():
        bad = _first_text(column)
        if bad is None:  # empty cells: a metric not logged at this step, dropped (and reported) by the fit
            values[name] = np.array([float(c) if c.strip() else np.nan for c in column], dtype=np.float64)
        else:
            text_columns[name] = f"row {bad[0]}: {bad[1]!r} is not a number"
    table = CurveTable(p, tuple(values), values, text_columns, tuple(cells), duplicates)
    for name in needed:
        table.resolve(name)
    return table
