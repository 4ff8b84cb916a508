"""Read the logs people already have into per-step tables, and turn a table into service points or a fit CSV.

A *history* is ``{step: {name: value}}`` (finite floats only). Readers:

- verl console logs: every ``step:N - key:value - key:value ...`` line (Ray's ``(TaskRunner pid=...)`` prefix,
  ANSI colours and any other output around them are ignored); several lines of one step are merged.
- JSONL: one object per line with a step (``step``, ``_step``, ``global_step`` or ``trainer/global_step``);
  nested objects are flattened (``metrics.loss`` -> ``loss``), so the engine's ``metrics.jsonl`` reads as is.
- CSV, W&B run-history exports included: a header row, a step column as above (``Step`` too); empty cells are
  "not logged at this step"; W&B chart exports' ``__MIN``/``__MAX`` columns are skipped.
- TensorBoard: every scalar of the event files in a directory (tensorboard's ``EventAccumulator``); each
  sub-directory holding event files is a run of its own.
- MLflow tracking folders (``mlruns``) or any tracking URI, through ``mlflow``'s client: one history per run.
- JSON arrays of row objects with a step as above (W&B's ``run.history()`` / ``scan_history()`` saved as JSON).
- wandb offline runs (``wandb/offline-run-*/run-*.wandb``, a run directory, or a ``wandb`` directory of them):
  their history records, read without wandb (:mod:`scalerl.integrations.wandb_offline`); one history per run.

MLflow runs and wandb offline runs also carry their description: each history is a :class:`RunHistory` whose
``config`` (MLflow's params, W&B's config), ``tags`` and ``notes`` ``scalerl import`` gives the run on the service
(:func:`service_description` fits them to what the service stores). CSV, JSON, JSONL, TensorBoard and verl logs
hold no description.

:class:`Columns` decides which column is the pass rate and how compute is obtained (a cumulative column, or a
per-step column accumulated, times a scale), and :func:`to_points` applies it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_core.contracts.points import finite_float
from scalerl.client.api import Point

History = dict[int, dict[str, float]]


class RunHistory(dict[int, dict[str, float]]):
    """A history (``{step: {name: value}}``) with the run's description as its source recorded it: ``config``
    (name -> value, nested as recorded), ``tags`` and ``notes``; empty where the source records none."""

    def __init__(
        self,
        rows: Mapping[int, dict[str, float]] | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        notes: str | None = None,
    ) -> None:
        super().__init__(rows or {})
        self.config: dict[str, Any] = dict(config or {})
        self.tags: list[str] = list(tags or [])
        self.notes: str = notes or ""


@dataclass(frozen=True)
class Description:
    """A run's description as the service stores it (``config``: flat, name -> number, string or bool), and what
    was left out to fit it (``dropped``: one line each)."""

    config: dict[str, Any]
    tags: list[str]
    notes: str
    dropped: list[str]

    def __bool__(self) -> bool:
        return bool(self.config or self.tags or self.notes)


#: The service's limits on a run's description (server/base/types.py: RunConfig, RunTags; NOTES_MAX).
CONFIG_MAX_KEYS = 200
CONFIG_KEY_MAX = 100
CONFIG_TEXT_MAX = 500
TAGS_MAX = 50
TAG_MAX = 64
NOTES_MAX = 10_000
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+=@/ -]*$")
#: Config keys that are the tracker's own bookkeeping, not the user's settings.
_INTERNAL_KEYS = ("_wandb",)


def _flat_config(config: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in config.items():
        name = f"{prefix}{key}"
        if not prefix and str(key) in _INTERNAL_KEYS:
            continue
        if isinstance(value, Mapping) and value:
            yield from _flat_config(value, f"{name}.")
        else:
            yield name, value


def _config_value(value: Any) -> Any:
    """A value the service stores as is (bool, finite number, text of at most 500 characters), else None."""
    if isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2**63):
        return value
    if isinstance(value, int):  # past what a 64-bit JSON reader keeps exactly: its digits
        value = str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        try:
            value = json.dumps(list(value), allow_nan=False)
        except (TypeError, ValueError):
            return None
    if isinstance(value, str) and len(value) <= CONFIG_TEXT_MAX and "\x00" not in value:
        return value
    return None


def service_description(config: Mapping[str, Any], tags: Iterable[str], notes: str = "") -> Description:
    """``config``, ``tags`` and ``notes`` as the service stores a run's description: nested config values become
    dotted keys (``optimizer.lr``), lists their JSON text; what cannot be stored (a null, NaN, text over 500
    characters, a key over 100, keys past 200, a tag the service refuses, tags past 50) is left out and named in
    ``dropped``; notes past 10,000 characters are cut."""
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for key, raw in _flat_config(config):
        value = _config_value(raw)
        if value is None or not key or len(key) > CONFIG_KEY_MAX or "\x00" in key:
            dropped.append(f"config {key[:60]!r}: {'no value' if raw is None else 'not storable'}")
        elif len(out) >= CONFIG_MAX_KEYS:
            dropped.append(f"config {key[:60]!r}: past {CONFIG_MAX_KEYS} keys")
        else:
            out[key] = value
    kept: list[str] = []
    for tag in dict.fromkeys(t.strip() for t in tags):
        if not (0 < len(tag) <= TAG_MAX and _TAG.match(tag)):
            dropped.append(f"tag {tag[:70]!r}: a tag is 1 to {TAG_MAX} characters of letters, digits and _.:+=@/ -")
        elif len(kept) >= TAGS_MAX:
            dropped.append(f"tag {tag!r}: past {TAGS_MAX} tags")
        else:
            kept.append(tag)
    return Description(out, kept, notes[:NOTES_MAX].replace("\x00", ""), dropped)


def description_of(history: History, config: Mapping[str, Any] | None = None, tags: Iterable[str] = ()) -> Description:
    """The description a source recorded for this history's run (nothing for a plain history), with ``config``
    merged over its config (key by key) and ``tags`` added to its tags, as the service stores it."""
    recorded = history if isinstance(history, RunHistory) else RunHistory()
    return service_description({**recorded.config, **(config or {})}, [*recorded.tags, *tags], recorded.notes)


_PARAM_INT = re.compile(r"^[+-]?\d+$")
_PARAM_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def param_value(text: str) -> Any:
    """An MLflow param (always text: ``str(value)`` of what was logged) as the value it was: an integer, a finite
    number, ``True``/``False``, else the text as is."""
    if _PARAM_INT.match(text):
        return int(text) if abs(int(text)) < 2**63 else text
    if text in ("True", "true", "False", "false"):
        return text in ("True", "true")
    if _PARAM_NUMBER.match(text) and math.isfinite(number := float(text)):
        return number
    return text


#: Step columns, the trainer's own first: W&B's ``_step`` counts ``wandb.log`` calls (an evaluation logged apart
#: from its training step adds one), so trainer steps 10, 20, 30 read as 10, 21, 32 when it is preferred.
STEP_KEYS = ("step", "global_step", "trainer/global_step", "train/global_step", "Step", "_step")
#: A W&B panel ("chart") export's metric column: ``<run name> - <metric>``.
_PANEL_COLUMN = re.compile(r"^(.+?) - (.+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_VERL_STEP = re.compile(r"(?:^|[\s)])step:(\d+) - (.*)$")

#: Pass-rate columns tried in order when none is named (regular expressions over column names).
PASS_RATE_PATTERNS = (
    r"^pass_rate$",
    r"^val-core/.*/(reward|acc)/mean@1$",
    r"^val/test_score/",
    r"^eval[_/]pass_rate$",
    r"^eval[_/](accuracy|acc)$",
    r"^eval[_/]reward$",
    r"^val[_/].*(acc|accuracy|pass_rate|score)",
    r"^gsm8k_val_mean_at_1$|^val_gsm8k_mean_at_1$|^val_score$",
)


class LogFormatError(ValueError):
    """A log that cannot be read; the message says what was expected."""


def _number(text: Any) -> float | None:
    """A cell's number: numeric text (CSV) is read; bools are refused."""
    return None if isinstance(text, bool) else finite_float(text)


def _add(history: History, step: int, values: Mapping[str, float]) -> None:
    if values:
        history.setdefault(step, {}).update(values)


# ---- line formats (also used incrementally by `scalerl watch`) -----------------------------------------------------


def parse_verl_line(line: str) -> tuple[int, dict[str, float]] | None:
    """``(step, values)`` of a verl ``step:N - key:value ...`` console line, else ``None``."""
    m = _VERL_STEP.search(_ANSI.sub("", line).rstrip())
    if m is None:
        return None
    values: dict[str, float] = {}
    for part in m.group(2).split(" - "):
        key, sep, raw = part.strip().rpartition(":")
        v = _number(raw) if sep else None
        if key and v is not None:
            values[key] = v
    return int(m.group(1)), values


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in obj.items():
        if isinstance(v, Mapping):
            # the engine's points keep their metrics under "metrics": keep the plain names
            yield from _flatten(v, "" if k == "metrics" and not prefix else f"{prefix}{k}/")
        else:
            yield f"{prefix}{k}", v


def parse_json_line(line: str) -> tuple[int, dict[str, float]] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    return step_row(dict(_flatten(obj)))


def step_row(flat: Mapping[str, Any]) -> tuple[int, dict[str, float]] | None:
    """``(step, values)`` of one flat row: the first step key of :data:`STEP_KEYS` it holds, and its other numbers."""
    step = next((flat[k] for k in STEP_KEYS if _number(flat.get(k)) is not None), None)
    if step is None:
        return None
    values = {k: v for k, raw in flat.items() if k not in STEP_KEYS and (v := _number(raw)) is not None}
    return int(float(step)), values


def csv_step_key(header: Iterable[str]) -> str:
    names = list(header)
    key = next((k for k in STEP_KEYS if k in names), None)
    if key is None:
        raise LogFormatError(f"no step column (one of {', '.join(STEP_KEYS)}); columns are: {', '.join(names)}")
    return key


def parse_csv_row(row: Mapping[str, str], step_key: str) -> tuple[int, dict[str, float]] | None:
    step = _number(row.get(step_key))
    if step is None:
        return None
    values: dict[str, float] = {}
    for k, raw in row.items():
        if k is None or k == step_key or k in STEP_KEYS or k.endswith(("__MIN", "__MAX")):
            continue
        v = _number(raw) if raw not in (None, "") else None
        if v is not None:
            values[k] = v
    return int(step), values


# ---- whole files ---------------------------------------------------------------------------------------------------


#: Rows or lines a reader skipped, by file: ``{path: (count, what they were)}`` (``scalerl import`` reports them).
SKIPPED: dict[Path, tuple[int, str]] = {}


def _read_lines(
    path: Path, parse: Callable[[str], Any], empty: str, errors: str = "strict", skipped: str | None = None
) -> History:
    """Every line of ``path`` through ``parse`` (a (step, values) pair or nothing); ``empty`` explains no match.
    With ``skipped`` (what such a line is not), the non-blank lines that gave nothing are counted in SKIPPED."""
    history: History = {}
    bad = 0
    with path.open(encoding="utf-8", errors=errors) as fh:
        for line in fh:
            parsed = parse(line)
            if parsed:
                _add(history, *parsed)
            elif line.strip():
                bad += 1
    if not history:
        raise LogFormatError(f"{path.name}: {empty}")
    if skipped is not None and bad:
        SKIPPED[path] = (bad, skipped)
    return history


def read_verl_log(path: Path) -> History:
    return _read_lines(path, parse_verl_line, "no verl 'step:N - key:value' lines", errors="replace")


def read_jsonl(path: Path) -> History:
    return _read_lines(
        path,
        parse_json_line,
        f"no JSON lines with a step ({', '.join(STEP_KEYS)})",
        skipped="lines that are not a JSON object with a step",
    )


def read_json(path: Path) -> History:
    """A JSON array of row objects (W&B's history saved as JSON), or JSON lines in a ``.json`` file."""
    text = path.read_text(encoding="utf-8-sig")
    if not text.lstrip().startswith("["):
        if text.lstrip().startswith("{") and "\n" in text.strip():
            return read_jsonl(path)
        raise LogFormatError(
            f"{path.name}: expected a JSON array of row objects with a step ({', '.join(STEP_KEYS)}), as W&B's "
            "run history saved as JSON, or JSON lines"
        )
    try:
        rows = json.loads(text)
    except ValueError as exc:
        raise LogFormatError(f"{path.name}: not valid JSON: {exc}") from exc
    history: History = {}
    bad = 0
    for row in rows:
        parsed = step_row(dict(_flatten(row))) if isinstance(row, dict) else None
        if parsed:
            _add(history, *parsed)
        else:
            bad += 1
    if not history:
        raise LogFormatError(f"{path.name}: no row of the JSON array holds a step ({', '.join(STEP_KEYS)})")
    if bad:
        SKIPPED[path] = (bad, "array items that are not an object with a step")
    return history


def read_wandb(path: Path) -> dict[str, History]:
    """One history per wandb offline run under ``path`` (named by the run's display name, else its id)."""
    from scalerl.integrations.wandb_offline import WandbFileError, read_run, run_files

    files = run_files(path)
    if not files:
        raise LogFormatError(f"{path}: no wandb run log (run-*.wandb) in it or its run directories")
    out: dict[str, History] = {}
    for f in files:
        try:
            run = read_run(f)
        except WandbFileError as exc:
            raise LogFormatError(f"{f}: {exc}") from exc
        history: History = {}
        for row in run.rows:
            parsed = step_row(row)
            if parsed:
                _add(history, *parsed)
        if not history:
            raise LogFormatError(f"{f}: no history records (nothing was logged with wandb.log)")
        if run.damaged:
            SKIPPED[path] = (run.damaged, f"damaged record(s) at the end of {f.name} (the run was cut off?)")
        name = run.name or f.stem.removeprefix("run-")
        described = RunHistory(history, config=run.config, tags=run.tags, notes=run.notes)
        out[name if name not in out else f"{name}-{f.stem.removeprefix('run-')}"] = described
    return out


def read_csv(path: Path) -> History:
    text = path.read_text(encoding="utf-8-sig")
    reader = csv.DictReader(io.StringIO(text))
    key = csv_step_key(reader.fieldnames or [])
    history: History = {}
    bad = 0
    for row in reader:
        parsed = parse_csv_row(row, key)
        if parsed:
            _add(history, *parsed)
        elif any((v or "").strip() for v in row.values() if isinstance(v, str)):
            bad += 1
    if bad:
        SKIPPED[path] = (bad, f"rows without a number in the step column {key!r}")
    return history


def split_panel_export(history: History) -> dict[str, History] | None:
    """A W&B panel export's history (every column ``<run> - <metric>``) as one history per run, keyed by the
    metric's own name (so ``--y eval/accuracy`` and the pass-rate guess find it); ``None`` for any other table."""
    columns = columns_of(history)
    matches = [_PANEL_COLUMN.match(c) for c in columns]
    if not columns or not all(matches):
        return None
    runs: dict[str, History] = {}
    for step, row in history.items():
        for name, value in row.items():
            m = _PANEL_COLUMN.match(name)
            assert m is not None
            runs.setdefault(m.group(1), {}).setdefault(step, {})[m.group(2)] = value
    return runs


def read_csv_runs(path: Path) -> dict[str, History]:
    """``{run name: history}`` of a CSV file: one run named after the file, or one per run of a W&B panel export."""
    history = read_csv(path)
    return split_panel_export(history) or {path.stem: history}


def tensorboard_runs(path: Path) -> dict[str, Path]:
    """The run directories under ``path``: each directory that directly holds event files (name: its path
    relative to ``path``, or ``path``'s own name)."""
    dirs = sorted({f.parent for f in path.rglob("*tfevents*")}) if path.is_dir() else [path.parent]
    if not dirs:
        raise LogFormatError(f"{path}: no TensorBoard event files (*tfevents*)")
    return {(path.name if d == path else str(d.relative_to(path))): d for d in dirs}


class TensorBoardReader:
    """Scalars of one run directory; :meth:`read` re-reads only what was appended since the last call."""

    def __init__(self, directory: Path) -> None:
        try:
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        except ImportError as exc:  # pragma: no cover - part of the integrations extra
            raise LogFormatError(
                "reading TensorBoard files needs tensorboard: pip install 'scalerl[integrations]'"
            ) from exc
        self._acc = EventAccumulator(str(directory), size_guidance={"scalars": 0, "tensors": 0})

    def read(self) -> History:
        self._acc.Reload()
        history: History = {}
        tags = self._acc.Tags()
        for tag in tags.get("scalars", []):
            for ev in self._acc.Scalars(tag):
                if (v := _number(ev.value)) is not None:
                    _add(history, int(ev.step), {tag: v})
        for tag in tags.get("tensors", []):  # TF2-style summaries keep scalars as 0-d tensors
            for ev in self._acc.Tensors(tag):
                vals = list(ev.tensor_proto.float_val) or list(ev.tensor_proto.double_val)
                if len(vals) == 1 and (v := _number(vals[0])) is not None:
                    _add(history, int(ev.step), {tag: v})
        return history


def read_tensorboard(path: Path) -> dict[str, History]:
    return {name: TensorBoardReader(d).read() for name, d in tensorboard_runs(path).items()}


def read_mlflow(uri: str | Path, experiment: str | None = None) -> dict[str, History]:
    """One history per run of a tracking folder (``mlruns``) or URI, named by the run's name (or id), with the run's
    params as its config (:func:`param_value`), its tags other than MLflow's own (``mlflow.*``) as ``key=value``
    tags (``key`` alone when the value is empty), and its note (``mlflow.note.content``) as its notes."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:  # pragma: no cover - part of the integrations extra
        raise LogFormatError("reading MLflow runs needs mlflow: pip install 'scalerl[integrations]'") from exc
    text = str(uri)
    if "://" not in text and not text.startswith("file:"):
        text = Path(text).resolve().as_uri()
    if text.startswith("file:"):
        # MLflow 3 keeps the folder store for existing `mlruns` folders behind this switch; we only read them.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    if text.startswith("sqlite:///"):
        db = text[len("sqlite:///") :]
        if db not in ("", ":memory:") and not Path(db).is_file():  # MLflow would create an empty store there
            raise LogFormatError(f"{uri}: no such file: {db}")
    elif text.startswith("file:") and not Path(_file_uri_path(text)).exists():
        raise LogFormatError(f"{uri}: no such folder: {_file_uri_path(text)}")
    if text.startswith(("http://", "https://")):  # an unreachable server fails now, not after minutes of retries
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    out: dict[str, History] = {}
    try:
        client = MlflowClient(tracking_uri=text)
        exps = client.search_experiments()
        ids = [e.experiment_id for e in exps if experiment is None or e.name == experiment]
        if not ids:
            raise LogFormatError(f"{uri}: no MLflow experiment" + (f" named {experiment!r}" if experiment else ""))
        for run in client.search_runs(ids):
            history: History = {}
            for key in run.data.metrics:
                for m in client.get_metric_history(run.info.run_id, key):
                    if (v := _number(m.value)) is not None:
                        _add(history, int(m.step), {key: v})
            name = run.info.run_name or run.info.run_id
            params = {k: param_value(v) for k, v in sorted(run.data.params.items())}
            user_tags = {k: v for k, v in sorted(run.data.tags.items()) if not k.startswith("mlflow.")}
            tags = [f"{k}={v}" if v else k for k, v in user_tags.items()]
            notes = run.data.tags.get("mlflow.note.content", "")
            described = RunHistory(history, config=params, tags=tags, notes=notes)
            out[name if name not in out else f"{name}-{run.info.run_id[:8]}"] = described
    except LogFormatError:
        raise
    except Exception as exc:  # MLflow's own errors (unreachable server, not a store, ...): one line, no traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LogFormatError(f"{uri}: cannot read the MLflow store: {first[:300]}") from exc
    if not out:
        raise LogFormatError(f"{uri}: no MLflow runs")
    return out


def _file_uri_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


FORMATS = ("auto", "verl-log", "jsonl", "json", "csv", "wandb-csv", "wandb", "tensorboard", "mlflow")


def detect_format(path: Path) -> str:
    from scalerl.integrations.wandb_offline import is_wandb_source

    if path.is_dir():
        if (path / "meta.yaml").exists() or any(path.glob("*/meta.yaml")) or path.name == "mlruns":
            return "mlflow"
        return "wandb" if is_wandb_source(path) else "tensorboard"
    if "tfevents" in path.name:
        return "tensorboard"
    suffix = path.suffix.lower()
    if suffix == ".wandb":
        return "wandb"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix == ".csv":
        return "csv"
    return "verl-log"


def read_any(path: Path, fmt: str = "auto") -> dict[str, History]:
    """``{run name: history}`` of one source."""
    fmt = detect_format(path) if fmt == "auto" else fmt
    if not path.exists():
        raise LogFormatError(f"{path}: no such file or directory")
    if fmt == "tensorboard":
        return read_tensorboard(path)
    if fmt == "mlflow":
        return read_mlflow(path)
    if fmt == "wandb":
        return read_wandb(path)
    name = path.stem
    if fmt == "verl-log":
        return {name: read_verl_log(path)}
    if fmt == "jsonl":
        return {name: read_jsonl(path)}
    if fmt == "json":
        return {name: read_json(path)}
    if fmt in ("csv", "wandb-csv"):
        return read_csv_runs(path)
    raise LogFormatError(f"unknown format {fmt!r} (allowed: {', '.join(FORMATS)})")


# ---- columns -> points ---------------------------------------------------------------------------------------------


def columns_of(history: History) -> list[str]:
    seen: dict[str, None] = {}
    for step in sorted(history):
        for k in history[step]:
            seen.setdefault(k, None)
    return list(seen)


def guess_pass_rate(columns: Iterable[str]) -> str | None:
    names = list(columns)
    for pattern in PASS_RATE_PATTERNS:
        for name in names:
            if re.search(pattern, name):
                return name
    return None


#: (column, per_step, unit, scale-by-gpus) tried in order when compute is not named.
AUTO_COMPUTE = (
    ("gpu_hours", False, "gpu_hours", False),
    ("compute", False, "compute", False),
    ("timing_s/step", True, "gpu_hours", True),
    ("perf/time_per_step", True, "gpu_hours", True),
    ("perf/total_num_tokens", True, "tokens", False),
    ("num_tokens", False, "tokens", False),
    ("train/num_tokens", False, "tokens", False),
    ("cum_total_tokens", False, "tokens", False),
    ("cum_time_s", False, "gpu_hours", True),
)


@dataclass(frozen=True)
class Columns:
    """Which column is the pass rate, and how compute is derived: ``x`` (``None``: the step) read as is, or
    accumulated over steps when ``per_step``; times ``scale``. ``unit`` names the result."""

    pass_rate: str | None
    x: str | None
    per_step: bool = False
    scale: float = 1.0
    unit: str = "step"
    pass_rate_scale: float = 1.0
    """The pass-rate column is multiplied by this (0.01 for a run logged in percent)."""

    def describe(self) -> str:
        how = "the step" if self.x is None else (f"sum of {self.x!r}" if self.per_step else repr(self.x))
        scale = "" if self.scale == 1.0 else f" x {self.scale:.6g}"
        percent = "" if self.pass_rate_scale == 1.0 else f" x {self.pass_rate_scale:g}"
        return f"pass rate: {self.pass_rate!r}{percent}; compute ({self.unit}): {how}{scale}"


def choose_columns(
    columns: Iterable[str],
    *,
    pass_rate: str | None = None,
    x: str | None = None,
    x_per_step: str | None = None,
    gpus: float | None = None,
) -> Columns:
    """The columns to use: the named ones, else guesses (:data:`PASS_RATE_PATTERNS`, :data:`AUTO_COMPUTE`).

    Time columns become GPU-hours (seconds × ``gpus`` / 3600; ``gpus`` defaults to 1, i.e. wall-clock hours).
    """
    names = list(columns)
    for named in (pass_rate, x, x_per_step):
        if named is not None and named not in names:
            raise LogFormatError(f"no column {named!r}; columns are: {', '.join(names)}")
    chosen_y = pass_rate if pass_rate is not None else guess_pass_rate(names)
    if x is not None or x_per_step is not None:
        col = x if x is not None else x_per_step
        return Columns(chosen_y, col, per_step=x is None, scale=1.0 if gpus is None else gpus, unit="compute")
    for col, per_step, unit, by_gpus in AUTO_COMPUTE:
        if col in names:
            scale = (gpus or 1.0) / 3600.0 if by_gpus else 1.0
            return Columns(chosen_y, col, per_step, scale, unit)
    return Columns(chosen_y, None, unit="step")


def to_points(history: History, cols: Columns, *, metrics: Iterable[str] | None = None) -> tuple[list[Point], int]:
    """The history as service points (sorted by step) and how many pass-rate values were left out for being
    outside [0, 1]. Metrics: the named ones, else every column but the pass rate (at most 64)."""
    wanted = None if metrics is None else set(metrics)
    points: list[Point] = []
    total = 0.0
    out_of_range = 0
    for step in sorted(history):
        row = history[step]
        if cols.x is None:
            compute = float(step)
        elif cols.per_step:
            total += row.get(cols.x, 0.0)
            compute = total
        else:
            compute = row.get(cols.x, total)
            total = compute
        compute = max(0.0, compute * cols.scale)
        rate = row.get(cols.pass_rate) if cols.pass_rate else None
        rate = None if rate is None else rate * cols.pass_rate_scale
        if rate is not None and not 0.0 <= rate <= 1.0:
            out_of_range += 1
            rate = None
        named = {k: v for k, v in row.items() if k != cols.pass_rate and (wanted is None or k in wanted)}
        points.append(Point.make(step, compute, rate, named))
    # cumulative columns can dip when a run was resumed; the service wants compute to grow with the step
    for i in range(1, len(points)):
        if points[i].compute < points[i - 1].compute:
            p = points[i]
            points[i] = Point(p.step, points[i - 1].compute, p.pass_rate, p.metrics)
    return points, out_of_range


def write_fit_csv(path: Path, points: list[Point], unit: str) -> int:
    """A CSV for ``scalerl fit`` (columns ``step``, the compute unit, ``pass_rate``): the points with a pass rate.
    Returns the number of rows."""
    x_name = {"gpu_hours": "gpu_hours", "tokens": "cum_total_tokens"}.get(unit, "compute")
    rows = [p for p in points if p.pass_rate is not None]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["step", x_name, "pass_rate"])
        for p in rows:
            w.writerow([p.step, repr(p.compute), repr(p.pass_rate)])
    return len(rows)
