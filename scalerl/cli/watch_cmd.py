"""``scalerl watch``: follow a growing log and report new points live, so any job gets forecasts and stop advice
with no code change (verl console log, JSONL, CSV, or a TensorBoard directory).

A step is sent once a later step has appeared (its training and validation lines are then complete), or after
``--settle`` seconds without new data. A FILE or directory that does not exist yet is waited for (the job may not
have created it). When the service answers ``stop``, ``--on-stop CMD`` runs (e.g. ``kill $PID`` or ``touch
STOP``), the run is reported ``stopped`` and the command exits with code 3; after ``--idle-exit`` seconds without
new data (the end of the log) the run is reported ``succeeded`` and it exits 0; on Ctrl-C it exits 0 and reports
no status (``scalerl finish RUN`` does). It never stops the job itself.
"""

from __future__ import annotations

import csv
import subprocess
import time
from pathlib import Path
from typing import Any

import click

from scalerl.cli.errors import fail
from scalerl.cli.import_cmd import as_percent_if_so, column_options, pick_columns

EXIT_STOP = 3


class Follower:
    """New rows of a growing file (by byte offset; a line without its newline yet is left for the next read)."""

    def __init__(self, path: Path, fmt: str) -> None:
        from scalerl.integrations.readers import TensorBoardReader, detect_format

        self.path = path
        self.fmt = detect_format(path) if fmt == "auto" else fmt
        self.offset = 0
        self.header: list[str] | None = None
        self.tb = TensorBoardReader(path) if self.fmt == "tensorboard" else None
        if self.fmt == "mlflow":
            fail("watch follows files and TensorBoard directories; import MLflow runs with `scalerl import`")

    def read(self) -> list[tuple[int, dict[str, float]]]:
        from scalerl.integrations.readers import csv_step_key, parse_csv_row, parse_json_line, parse_verl_line

        if self.tb is not None:
            return sorted(self.tb.read().items())
        if not self.path.exists():
            return []
        if self.path.is_dir():
            fail(f"{self.path} is a directory, but is read as {self.fmt}; give --format tensorboard or a file")
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        lines = chunk[: end + 1].decode("utf-8", errors="replace").splitlines()
        out: list[tuple[int, dict[str, float]]] = []
        if self.fmt in ("csv", "wandb-csv"):
            if self.header is None and lines:
                self.header = next(csv.reader([lines.pop(0).lstrip("\ufeff")]))
            if self.header is None:
                return []
            key = csv_step_key(self.header)
            for row in csv.DictReader(lines, fieldnames=self.header):
                parsed = parse_csv_row(row, key)
                if parsed:
                    out.append(parsed)
            return out
        parse = parse_json_line if self.fmt == "jsonl" else parse_verl_line
        for line in lines:
            parsed = parse(line)
            if parsed:
                out.append(parsed)
        return out


@click.command("watch")
@click.argument("source", metavar="FILE")
@click.option("--run", "run_name", required=True, help="Run name (registered, or attached to if it exists).")
@column_options
@click.option("--budget", type=float, help="The run's compute budget (in its compute unit).")
@click.option("--experiment", help="Experiment to join, by name (created if missing; default: 'default').")
@click.option("--experiment-id", type=int, hidden=True, help="Experiment to join, by id.")
@click.option("--resume", type=click.Choice(["auto", "allow", "must", "never"]), default="auto", show_default=True,
              help="A run of that name that exists: auto continues it while live and starts RUN-2 once it ended; "
                   "allow continues (reopens) it; must requires it; never refuses it.")  # fmt: skip
@click.option("--interval", type=float, default=5.0, show_default=True, help="Seconds between reads.")
@click.option("--settle", type=float, default=30.0, show_default=True, help="Send the last step after this many "
              "seconds without new data.")  # fmt: skip
@click.option("--idle-exit", type=float, help="Exit after this many seconds without new data.")
@click.option("--on-stop", "on_stop", metavar="CMD", help="Shell command to run when the service says stop.")
@click.option("--url", default=None, help="Server URL (default: SCALERL_URL or the saved credentials).")
@click.option("--token", default=None, help="API token (default: SCALERL_TOKEN or the saved credentials).")
def watch_cmd(
    source: str, run_name: str, fmt: str, y_col: str | None, x_col: str | None, x_per_step: str | None,
    gpus: float | None, budget: float | None, experiment: str | None, experiment_id: int | None, resume: str,
    interval: float,
    settle: float,
    idle_exit: float | None, on_stop: str | None, url: str | None, token: str | None,
) -> None:  # fmt: skip
    """Follow FILE as a job writes it and report each new step to the service.

    \b
    scalerl watch train.log --run grpo-lr1e-6 --gpus 8 --on-stop 'kill $(cat job.pid)'
    scalerl watch runs/demo/metrics.jsonl --run demo
    scalerl watch tb/run1 --run run1 --y eval/accuracy --experiment my-sweep
    """
    from scalerl.cli.import_cmd import is_store_uri
    from scalerl.client import ApiError, Reporter
    from scalerl.integrations.readers import Columns, History, to_points

    if is_store_uri(source):
        fail(f"{source}: watch follows files and TensorBoard directories; import an MLflow store with `scalerl import`")
    path = Path(source)
    if experiment is not None and experiment_id is not None:
        fail("give --experiment NAME or --experiment-id ID, not both")
    if interval <= 0 or not interval < float("inf"):
        fail(f"--interval must be a number of seconds > 0, got {interval}")
    follower = _wait_for(path, fmt, interval, idle_exit)
    if follower is None:
        click.echo(f"scalerl watch: {path} did not appear within --idle-exit {idle_exit:g} s", err=True)
        raise SystemExit(0)
    reporter: Reporter | None = None
    history: History = {}
    sent: set[int] = set()
    cols: Columns | None = None
    last_new = time.monotonic()
    announced = None
    scale_known = False  # percent or fraction: decided on the pass-rate values seen when the first one arrives
    dropped_warned = 0
    code = 0
    final: str | None = None
    try:
        while True:
            rows = follower.read()
            fresh = False
            for step, values in rows:
                if step in sent and follower.tb is not None:
                    continue
                old = history.get(step)
                if old is None or any(old.get(k) != v for k, v in values.items()):
                    history.setdefault(step, {}).update(values)
                    fresh = True
            now = time.monotonic()
            if fresh:
                last_new = now
            if history and cols is None:
                cols = pick_columns(_columns(history), y_col, x_col, x_per_step, gpus, path.name)
                click.echo(f"watching {path} as run {run_name}: {cols.describe()}", err=True)
                try:
                    reporter = Reporter.start(
                        run_name, url=url, token=token, budget=budget, experiment_id=experiment_id,
                        experiment=experiment, compute_unit=cols.unit,
                        flush_interval=min(2.0, interval), poll_interval=max(interval, 5.0), resume=resume,
                        handle_signals=False,  # an observer: a signal to watch says nothing of how the job ends
                    )  # fmt: skip
                except ApiError as exc:
                    fail(f"the service refused run {run_name}: {exc}")
            pending_scale = cols is not None and not scale_known and cols.pass_rate is not None
            if cols is not None and pending_scale and any(cols.pass_rate in row for row in history.values()):
                cols, scale_known = as_percent_if_so(cols, history, path.name), True
            if cols is not None and reporter is not None:
                top = max(history)
                ready = [s for s in history if s not in sent and (s < top or now - last_new >= settle)]
                if ready:
                    points, dropped = to_points(history, cols)
                    if dropped > dropped_warned:
                        dropped_warned = dropped
                        click.echo(f"warning: {dropped} pass-rate value(s) of {cols.pass_rate!r} outside [0, 1] "
                                   "were not sent (a log in percent is read as such only if its first values "
                                   "show it)", err=True)  # fmt: skip
                    for p in points:
                        if p.step in ready:
                            reporter.log(p.step, p.compute, p.pass_rate, p.metrics)
                            sent.add(p.step)
            if reporter is None:
                if idle_exit is not None and now - last_new >= idle_exit:
                    break
                time.sleep(interval)
                continue
            if reporter.refused:
                fail(f"the service refused run {run_name}: {reporter.last_error}")
            if reporter.last_fit is not None and reporter.last_fit != announced:
                announced = reporter.last_fit
                f = announced
                click.echo(f"step {max(sent) if sent else '-'}: forecast {f.status} {_ceiling(reporter, f.A)} B={f.B} "
                           f"C_mid={f.C_mid}; action {reporter.action}")  # fmt: skip
            if reporter.should_stop:
                click.echo(f"the service says stop for run {run_name}", err=True)
                if on_stop:
                    subprocess.run(on_stop, shell=True, check=False)
                code = EXIT_STOP
                final = "stopped"
                break
            if idle_exit is not None and now - last_new >= idle_exit:
                final = "succeeded"
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        final = None
    finally:
        if reporter is not None:
            _wind_up(reporter, history, sent, cols, final, run_name, idle_exit)
    raise SystemExit(code)


def _wait_for(path: Path, fmt: str, interval: float, idle_exit: float | None) -> Follower | None:
    """The follower of ``path`` once it exists (its format is guessed from what appeared: a directory is a
    TensorBoard log, never a verl log); ``None`` if it did not appear within ``idle_exit`` seconds."""
    if not path.exists():
        click.echo(f"scalerl watch: waiting for {path} to appear (Ctrl-C to stop)", err=True)
        started = time.monotonic()
        while not path.exists():
            if idle_exit is not None and time.monotonic() - started >= idle_exit:
                return None
            time.sleep(min(interval, 1.0))
    return Follower(path, fmt)


def _wind_up(reporter: Any, history: dict[int, dict[str, float]], sent: set[int], cols: Any, final: str | None,
             run_name: str, idle_exit: float | None) -> None:  # fmt: skip
    """Send what is left and report the run's final status: ``stopped`` after a stop, ``succeeded`` at the end of
    the log (``--idle-exit``); none after Ctrl-C (the job may still be running)."""
    from scalerl.integrations.readers import to_points

    leftover = [s for s in history if s not in sent]
    if leftover and cols is not None:
        points, _ = to_points(history, cols)
        for p in points:
            if p.step in leftover:
                reporter.log(p.step, p.compute, p.pass_rate, p.metrics)
    if final is None:
        delivered = reporter.close(timeout=30.0)
        click.echo(f"scalerl watch: run {run_name} left as it is; report its end with `scalerl finish {run_name}`",
                   err=True)  # fmt: skip
    else:
        reason = "stopped by the service" if final == "stopped" else f"the log ended (no new data for {idle_exit:g} s)"
        delivered = reporter.finish(final, f"scalerl watch: {reason}")
    if not delivered:
        click.echo(f"scalerl watch: {reporter.buffered} points not delivered ({reporter.last_error})", err=True)


def _columns(history: dict[int, dict[str, float]]) -> list[str]:
    from scalerl.integrations.readers import columns_of

    return columns_of(history)


def register(cli: click.Group) -> None:
    cli.add_command(watch_cmd)


def _ceiling(reporter: Any, a: float | None) -> str:
    """The ceiling with its interval (the service's newest fit with intervals), else ``A=...`` alone."""
    from scalerl.cli.import_naming import current_ceiling
    from scalerl.client import ScalerlError

    try:
        return current_ceiling(reporter.client, reporter.run_id)[0]
    except (ScalerlError, AttributeError, TypeError):
        return f"A={a}"
