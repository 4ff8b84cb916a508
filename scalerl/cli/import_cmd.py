"""``scalerl import``: forecasts for past runs (TensorBoard, W&B CSV exports, MLflow, verl console logs, JSONL/CSV).

Each source becomes one run (a TensorBoard directory with several run sub-directories, or an MLflow store, gives
several); the points go to the service (grouped as an experiment with ``--experiment``) or, with ``--csv-out``, to
CSV files that ``scalerl fit`` reads.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from scalerl.cli.errors import fail, write_output
from scalerl.cli.import_naming import current_ceiling, distinct_names

if TYPE_CHECKING:
    from scalerl.client.api import Point
    from scalerl.integrations.readers import Columns, Description

F = TypeVar("F", bound=Callable[..., Any])
#: Seconds an import waits in all for the service's fits with intervals (each run's ceiling is printed with them).
FORECAST_WAIT = 30.0

COLUMN_OPTIONS = [
    click.option(
        "--format",
        "fmt",
        default="auto",
        show_default=True,
        help="auto, verl-log, jsonl, csv, wandb-csv, tensorboard, mlflow.",
    ),
    click.option("--y", "y_col", metavar="COL", help="Pass-rate column (default: guessed; asked for on a terminal)."),
    click.option("--x", "x_col", metavar="COL", help="A cumulative compute column, used as is."),
    click.option("--x-per-step", metavar="COL", help="A per-step compute column (tokens, seconds), accumulated."),
    click.option(
        "--gpus",
        type=float,
        help="Devices the job used: time columns become GPU-hours (x gpus / 3600); "
        "with --x/--x-per-step, a plain multiplier.",
    ),
]


def column_options(fn: F) -> F:
    for opt in reversed(COLUMN_OPTIONS):
        fn = opt(fn)
    return fn


def pick_columns(columns: list[str], y_col: str | None, x_col: str | None, x_per_step: str | None,
                 gpus: float | None, what: str) -> Columns:  # fmt: skip
    from scalerl.integrations.readers import Columns, LogFormatError, choose_columns

    if x_col and x_per_step:
        fail("give --x or --x-per-step, not both")
    if gpus is not None and not (math.isfinite(gpus) and gpus > 0):
        fail(f"--gpus must be a finite number > 0, got {gpus}")
    try:
        cols = choose_columns(columns, pass_rate=y_col, x=x_col, x_per_step=x_per_step, gpus=gpus)
    except LogFormatError as exc:
        fail(f"{what}: {exc}")
    if cols.pass_rate is None:
        if not sys.stdin.isatty():
            fail(f"{what}: no pass-rate column recognised; name one with --y (columns: {', '.join(columns)})")
        click.echo(f"{what}: which column is the held-out pass rate?", err=True)
        for i, c in enumerate(columns):
            click.echo(f"  [{i}] {c}", err=True)
        index = click.prompt("column", type=click.IntRange(0, len(columns) - 1), err=True)
        cols = Columns(columns[index], cols.x, cols.per_step, cols.scale, cols.unit)
    return cols


@click.command("import")
@click.argument("sources", metavar="SOURCE...", nargs=-1, required=True)
@column_options
@click.option("--run", "run_name", help="Run name (one source with one run only; default: file or run name).")
@click.option("--experiment", help="Group the runs under this experiment, by name (created if missing, with no "
              "grid and no placeholder run; default: 'default').")  # fmt: skip
@click.option("--budget", type=float, help="Budget per run, in the compute unit (default: the run's last compute).")
@click.option("--task", help="The runs' task: finished runs of one task and model teach the service its team prior.")
@click.option("--model", help="The runs' base model (with --task: runs the service learns a team prior from).")
@click.option("--csv-out", type=click.Path(file_okay=False, path_type=Path), help="Write CSVs for `scalerl fit` "
              "here instead of posting to the service.")  # fmt: skip
@click.option("--config", "config_items", multiple=True, metavar="KEY=VALUE",
              help="Add to every imported run's config (numbers and true/false as such, else text), over what the "
              "source recorded: for sources that record none (CSV, JSON, logs, TensorBoard).")  # fmt: skip
@click.option("--tag", "extra_tags", multiple=True, metavar="TAG", help="Add this tag to every imported run.")
@click.option("--url", default=None, help="Server URL (default: SCALERL_URL or the saved credentials).")
@click.option("--token", default=None, help="API token (default: SCALERL_TOKEN or the saved credentials).")
def import_cmd(
    sources: tuple[str, ...], fmt: str, y_col: str | None, x_col: str | None, x_per_step: str | None,
    gpus: float | None, run_name: str | None, experiment: str | None, budget: float | None, task: str | None,
    model: str | None, csv_out: Path | None, config_items: tuple[str, ...], extra_tags: tuple[str, ...],
    url: str | None, token: str | None,
) -> None:  # fmt: skip
    """Import past runs and forecast them (or write CSVs for `scalerl fit`).

    \b
    scalerl import train.log --gpus 8                         # a verl console log
    scalerl import tb/ --experiment async-reward --gpus 8     # TensorBoard: one run per sub-directory
    scalerl import wandb_export.csv --y eval/accuracy         # a W&B run-history CSV export
    scalerl import mlruns --csv-out curves/                   # every MLflow run, as CSVs
    scalerl import sqlite:///mlflow.db                        # an MLflow store by URI (sqlite, file, http(s))
    scalerl import runs/*.csv --experiment past --task gsm8k --model Qwen/Qwen2.5-7B   # seed the team prior

    Imported runs are marked succeeded. With --task and --model they count as finished runs of that stack: the
    next experiment submitted with the same task and model learns its shape prior from them (8 runs at least).

    Each run keeps its description where the source records one: an MLflow run's params become its config, its
    tags (other than MLflow's own) its tags, its note its notes; a wandb offline run's config (nested keys dotted:
    optimizer.lr), tags and notes. `scalerl runs --columns config.lr` shows them; --config and --tag add to them.
    """
    from scalerl.integrations.readers import (
        SKIPPED,
        LogFormatError,
        columns_of,
        description_of,
        read_any,
        to_points,
        write_fit_csv,
    )

    if budget is not None and not (math.isfinite(budget) and budget > 0):
        fail(f"--budget must be a finite number > 0, got {budget}")
    extra_config = parse_config_items(config_items)
    runs = []
    for source in sources:
        uri = is_store_uri(source)
        src = Path(source)
        try:
            found = read_mlflow_uri(source, fmt) if uri else read_any(src, fmt)
        except LogFormatError as exc:
            fail(str(exc) if uri else _about(src, str(exc)))
        except OSError as exc:
            fail(f"{source}: cannot read: {exc.strerror or exc}")
        except UnicodeDecodeError as exc:
            fail(f"{src}: not UTF-8 text (byte {exc.start}); expected a log, JSON lines or a CSV file saved as UTF-8")
        except RecursionError:
            fail(f"{src}: cannot read: JSON nested too deeply")
        if not uri and src in SKIPPED:
            count, what = SKIPPED.pop(src)
            click.echo(f"note: {source}: skipped {count} {what}", err=True)
        for name, history in found.items():
            if not history:
                fail(f"{source}: run {name!r} has no points")
            runs.append((source if uri else src.name, None if uri else src.stem, name, history, source))
    if run_name and len(runs) > 1:
        fail(f"--run names one run, but the sources hold {len(runs)}")
    names, renamed = distinct_names([(label, name) for label, _stem, name, _history, _source in runs])
    for note in renamed:
        click.echo(f"note: {note}", err=True)
    prepared: list[tuple[str, list[Point], Columns, Description]] = []
    for (label, stem, name, history, _source), final_name in zip(runs, names, strict=True):
        what = f"{label}:{name}" if name != stem else label
        described = description_of(history, extra_config, extra_tags)
        cols = as_percent_if_so(pick_columns(columns_of(history), y_col, x_col, x_per_step, gpus, what), history, what)
        try:
            points, bad = to_points(history, cols)
        except ValueError as exc:  # a point the service would refuse (a negative step, ...)
            fail(f"{what}: {exc}")
        n_rate = sum(p.pass_rate is not None for p in points)
        click.echo(f"{what}: {len(points)} steps, {n_rate} with a pass rate; {cols.describe()}", err=True)
        if bad:
            click.echo(f"{what}: {bad} pass-rate values outside [0, 1] left out (not a pass rate?)", err=True)
        if n_rate == 0:
            fail(
                f"{what}: no pass-rate value in [0, 1] in column {cols.pass_rate!r}"
                + (f" ({bad} outside it: percentages? divide them by 100)" if bad else "")
                + "; name the pass-rate column with --y"
            )
        if described:
            keys = ", ".join(list(described.config)[:8]) + (", ..." if len(described.config) > 8 else "")
            click.echo(f"{what}: config: {len(described.config)} keys" + (f" ({keys})" if keys else "")
                       + (f"; tags: {', '.join(described.tags)}" if described.tags else ""), err=True)  # fmt: skip
        for dropped in described.dropped:
            click.echo(f"note: {what}: left out {dropped}", err=True)
        prepared.append((run_name or final_name, points, cols, described))
    labels = [source for *_, source in runs]
    if csv_out is not None:
        targets: dict[Path, int] = {}
        if any(described for *_, described in prepared):
            click.echo("note: --csv-out writes the points only; the runs' config and tags go to the service", err=True)
        for i, (name, _points, _cols, _described) in enumerate(prepared):
            path = csv_out / f"{_safe(name)}.csv"
            if path in targets:
                j = targets[path]
                fail(f"runs {prepared[j][0]!r} of {labels[j]} and {name!r} of {labels[i]} would both be written to "
                     f"{path}; import them one at a time, each with its own --run NAME")  # fmt: skip
            targets[path] = i
        for (_name, points, cols, _described), path in zip(prepared, targets, strict=True):
            replaced = " (replaced the file there)" if path.exists() else ""
            write_output(path, functools.partial(write_fit_csv, points=points, unit=cols.unit), "--csv-out")
            rows = sum(p.pass_rate is not None for p in points)  # write_fit_csv's rows
            click.echo(f"wrote {path} ({rows} rows){replaced}")
        return
    seen: dict[str, str] = {}
    for (name, _points, _cols, _described), label in zip(prepared, labels, strict=True):
        if name in seen:
            fail(f"{seen[name]} and {label} both hold a run named {name!r}, which would be one run on the service; "
                 "import them one at a time, each with its own --run NAME")  # fmt: skip
        seen[name] = label
    for option, value in (("--task", task), ("--model", model)):
        if value is not None and not value.strip():
            fail(f"{option} must not be empty")
    _post(prepared, experiment, budget, task, model, url, token)


def is_store_uri(source: str) -> bool:
    """A tracking-store URI (``sqlite:///mlflow.db``, ``file:///.../mlruns``, ``http(s)://host:5000``, ...) rather
    than a path: read with MLflow's client as given (a path type would collapse its ``//``)."""
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source) is not None or source.startswith("file:")


def read_mlflow_uri(uri: str, fmt: str) -> Any:
    from scalerl.integrations.readers import LogFormatError, read_mlflow

    if fmt not in ("auto", "mlflow"):
        raise LogFormatError(f"{uri}: a URI is read as an MLflow tracking store, not as {fmt!r}")
    return read_mlflow(uri)


def as_percent_if_so(cols: Columns, history: Any, what: str) -> Columns:
    """``cols`` reading the pass rate as ``scalerl fit`` does: a whole run logged in percent (values in [0, 100]
    reaching above 1) is divided by 100, with a note; other values are left to :func:`to_points`'s range check.
    Shared by ``import`` (the whole file) and ``watch`` (the values seen when the pass rate first appears)."""
    import dataclasses

    import numpy as np

    from rl_core.scaling.measure.curves_io import CurveFileError, as_pass_rate

    if cols.pass_rate is None:
        return cols
    values = np.array([row[cols.pass_rate] for row in history.values() if cols.pass_rate in row], dtype=float)
    try:
        _, notes = as_pass_rate(values, f"{what}: column {cols.pass_rate!r}")
    except CurveFileError:
        return cols
    for note in notes:
        click.echo(f"note: {note}", err=True)
    return dataclasses.replace(cols, pass_rate_scale=0.01) if notes else cols


def _about(src: Path, message: str) -> str:
    """``message`` about ``src``, naming it unless it does already."""
    return message if str(src) in message or src.name in message else f"{src}: {message}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=," else "_" for c in name).strip("_") or "run"


def parse_config_items(items: tuple[str, ...]) -> dict[str, Any]:
    """``--config KEY=VALUE`` as config values: JSON numbers and true/false as such, anything else as text."""
    from scalerl.cli.key_values import parse_key_values

    out: dict[str, Any] = {}
    for key, (value, raw) in parse_key_values(items, "--config", "--config lr=1e-6 or --config loss=cispo").items():
        number = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))  # bools are ints
        out[key] = value if number else raw
    return out


def _post(prepared: list[tuple[str, list[Point], Columns, Description]], experiment: str | None,
          budget: float | None, task: str | None, model: str | None, url: str | None,
          token: str | None) -> None:  # fmt: skip
    from scalerl.client import ApiError, Client, ScalerlError

    try:
        with Client(url, token, timeout=60) as api:
            exp_id = None
            if experiment:
                units = sorted({cols.unit for _name, _points, cols, _described in prepared})
                if len(units) > 1:
                    fail(f"--experiment {experiment}: the runs measure compute in different units ({', '.join(units)});"
                         " runs of one experiment must share one (import them into separate experiments)")  # fmt: skip
                exp = api.ensure_experiment(
                    experiment, compute_unit=units[0], task=task, model=model, description="imported by scalerl import"
                )
                exp_id = int(exp["id"])
            waited_until = time.monotonic() + FORECAST_WAIT  # one wait for the whole import, not per run
            for name, points, cols, described in prepared:
                run_budget = budget if budget is not None else (points[-1].compute or None)
                # Importing a file again adds to the run of that name, whatever its status (points are
                # idempotent by step): resume="allow" would reopen a finished run, so look it up instead.
                run = api.find_run(name, exp_id) if exp_id is not None else api.find_run_by_name(name, "default")
                if run is None:
                    run = api.register_run(name, experiment_id=exp_id, budget=run_budget, task=task, model=model,
                                           compute_unit=cols.unit, resume="never")  # fmt: skip
                if described:
                    try:
                        api.update_run(run.id, config=described.config or None, tags=described.tags or None,
                                       notes=described.notes or None)  # fmt: skip
                    except ApiError as exc:  # the points are still worth importing: say what was refused
                        click.echo(f"note: run {name}: the service refused its config or tags ({exc})", err=True)
                accepted = duplicates = rejected = 0
                for i in range(0, len(points), 1000):
                    answer = api.post_points(run.id, points[i : i + 1000])
                    accepted += answer.accepted
                    duplicates += answer.duplicates
                    rejected += answer.n_rejected
                info = api.run_info(run.id)
                if info.status in ("queued", "running"):
                    info = api.report_status(run.id, "succeeded", "imported by scalerl import")
                ceiling, status = current_ceiling(api, run.id, wait=max(0.0, waited_until - time.monotonic()))
                a = f", {ceiling}" + (f" ({status})" if status else "")
                click.echo(
                    f"run {name} (id {run.id}): {accepted} new points, {duplicates} already stored, "
                    f"{rejected} rejected; {info.status}{a}"
                )
    except ScalerlError as exc:
        fail(str(exc))


def register(cli: click.Group) -> None:
    cli.add_command(import_cmd)
