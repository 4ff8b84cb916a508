"""``scalerl submit`` and ``scalerl wait``: a grid from CI, and the verdict's exit code to branch on.

Exit codes: scalerl/cli/exit_codes.py (table: docs/api.md, "Exit codes"). The POST that creates an experiment is
sent once (it is not idempotent); every read while waiting rides out an outage of up to ``--retry-for`` seconds
(scalerl/cli/waiting.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from scalerl.cli.errors import connect, fail, refused
from scalerl.cli.exit_codes import EXIT_UNREACHABLE

if TYPE_CHECKING:
    # The REST client needs httpx (extras `client`/`server`): imported when a command runs, so that `scalerl fit`
    # works from `pip install scalerl` with no extras.
    from scalerl.client.api import Client

F = TypeVar("F", bound=Callable[..., Any])


def _connection_options(f: F) -> F:
    f = click.option("--token", default=None, help="API token (default: SCALERL_TOKEN or the saved credentials).")(f)
    return click.option("--url", default=None, help="Server URL (default: SCALERL_URL or the saved credentials).")(f)


def _wait_options(f: F) -> F:
    for option in reversed(
        (
            click.option("--timeout", type=float, default=86400.0, show_default=True, help="Seconds to wait at most."),
            click.option("--poll", type=float, default=10.0, show_default=True, help="Seconds between checks."),
            click.option(
                "--retry-for",
                type=float,
                default=900.0,
                show_default=True,
                help="Seconds to keep retrying an unreachable service (connection errors, timeouts, 429, 5xx) "
                "before exiting 5.",
            ),
            click.option("--fail-if", "fail_if", multiple=True, help="Exit 1 if this holds at the end (repeatable)."),
            click.option(
                "--decide-early",
                is_flag=True,
                help="Accept a decision among the runs that have a forecast, ignoring queued, running or resumable "
                "runs that have none yet (they could still win). By default the gate waits for them.",
            ),
        )
    ):
        f = option(f)
    return f


def _check(fail_if: tuple[str, ...], timeout: float, poll: float, retry_for: float) -> list[Any]:
    from scalerl.cli.gate import ConditionError, parse_condition

    try:
        conditions = [parse_condition(c) for c in fail_if]
    except ConditionError as exc:
        fail(str(exc))
    if timeout <= 0 or poll <= 0 or retry_for < 0:
        fail("--timeout and --poll must be positive, --retry-for >= 0")
    return conditions


@click.command("submit")
@click.argument("grid", type=click.Path(dir_okay=False, path_type=Path))
@_connection_options
@click.option("--dry-run", is_flag=True, help="Validate and list the runs; store nothing.")
@click.option("--wait", is_flag=True, help="Wait until the verdict is decided or every run finished.")
@_wait_options
def submit_cmd(
    grid: Path,
    url: str | None,
    token: str | None,
    dry_run: bool,
    wait: bool,
    timeout: float,
    poll: float,
    retry_for: float,
    fail_if: tuple[str, ...],
    decide_early: bool,
) -> None:
    """Submit a grid document (YAML or JSON); with --wait, wait for the verdict as `scalerl wait` does.

    Exit codes: 0 submitted / decided, 1 a --fail-if condition holds, 2 bad input (or refused by the server),
    3 timed out, 4 every run finished undecided, 5 service unreachable, 6 no token or token refused.

    Conditions: undecided, unfinished, any-failed, best==NAME, best!=NAME, A<X.
    """
    from scalerl.client.api import ApiError, ServiceUnavailable

    conditions = _check(fail_if, timeout, poll, retry_for)
    if conditions and not wait:
        fail("--fail-if needs --wait")
    if not grid.is_file():
        fail(f"grid document {grid} does not exist")
    body = grid.read_bytes()
    ctype = "application/json" if grid.suffix == ".json" else "application/yaml"
    with connect(url, token) as client:
        # Created: only the id and n_runs are read, so the answer carries no runs (a 4,096-run grid's were 7 MB).
        try:
            created = client.create_experiment(
                body, content_type=ctype, dry_run=dry_run, runs_limit=None if dry_run else 0
            )
        except ServiceUnavailable as exc:
            fail(f"cannot reach the server at {client.url}: {exc} (nothing was retried)", EXIT_UNREACHABLE)
        except ApiError as exc:
            refused(exc, client)
        if dry_run:
            for run in created["runs"]:
                click.echo(f"{run['name']}\tbudget={run['budget']:g}")
            click.echo(f"{created['n_runs']} runs, total budget {created['total_budget']:g}")
            for warning in created.get("warnings", []):
                click.echo(f"warning: {warning}")
            if created.get("fit_prior"):
                click.echo(f"forecasts: {created['fit_prior']}")
            return
        exp_id = int(created["id"])
        click.echo(f"experiment {exp_id} ({created['name']}): {created['n_runs']} runs queued")
        if created.get("fit_prior"):
            click.echo(f"forecasts: {created['fit_prior']}")
        click.echo(f"dashboard: {client.url}/experiments/{exp_id}")
        if not wait:
            click.echo(f"wait for its verdict: scalerl wait {exp_id}")
            return
        _gate(client, exp_id, timeout, poll, retry_for, conditions, decide_early)


@click.command("wait")
@click.argument("experiment")
@_connection_options
@_wait_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the verdict as JSON (the REST answer: ablations, work_spread and all) instead of the text report; "
    "every other line goes to stderr.",
)
def wait_cmd(
    experiment: str,
    url: str | None,
    token: str | None,
    timeout: float,
    poll: float,
    retry_for: float,
    fail_if: tuple[str, ...],
    decide_early: bool,
    as_json: bool,
) -> None:
    """Re-attach to EXPERIMENT (an id, or a name) and wait for its verdict, as `scalerl submit --wait` does.

    Exit codes: 0 decided, 1 a --fail-if condition holds, 2 bad input (e.g. no such experiment), 3 timed out,
    4 every run finished undecided, 5 service unreachable, 6 no token or token refused.

    Conditions: undecided, unfinished, any-failed, best==NAME, best!=NAME, A<X.
    """
    from scalerl.cli.waiting import Patient, Unreachable
    from scalerl.client.api import ApiError

    conditions = _check(fail_if, timeout, poll, retry_for)
    with connect(url, token) as client:
        if experiment.isdigit():
            exp_id = int(experiment)
        else:
            patient = Patient(retry_for, _note)
            try:
                found = patient.call(lambda: client.find_experiment(experiment))
            except Unreachable as exc:
                fail(f"cannot reach the server at {client.url}: {exc}", EXIT_UNREACHABLE)
            except ApiError as exc:
                refused(exc, client)
            if found is None:
                fail(f"no experiment named {experiment!r}")
            exp_id = int(found["id"])
        click.echo(f"experiment {exp_id}: dashboard: {client.url}/experiments/{exp_id}", err=as_json)
        _gate(client, exp_id, timeout, poll, retry_for, conditions, decide_early, as_json)


def _note(message: str) -> None:
    click.echo(message, err=True)


def _gate(
    client: Client,
    exp_id: int,
    timeout: float,
    poll: float,
    retry_for: float,
    conditions: list[Any],
    decide_early: bool = False,
    as_json: bool = False,
) -> None:
    """Wait for the verdict, print it, exit with the gate's code (scalerl/cli/gate.py: ``outcome``). The verdict is
    the experiment's stored assessment's: never decided while a run that could still win has no forecast, unless
    ``decide_early``."""
    import sys

    from scalerl.cli.gate import needs_statuses, outcome
    from scalerl.cli.waiting import Patient, Progress, Unreachable, poll_verdict, with_scorecard
    from scalerl.client.api import ApiError

    patient = Patient(retry_for, _note)
    deadline = time.monotonic() + timeout

    def read() -> dict[str, Any]:
        return client.verdict(exp_id, decide_early=decide_early)

    try:
        verdict, timed_out = poll_verdict(patient, read, deadline, poll, Progress(_note))
        verdict = with_scorecard(patient, client, exp_id, verdict)
        statuses: list[str] = []
        if needs_statuses(conditions):
            statuses = [r.status for r in patient.call(lambda: client.list_runs(exp_id))]
    except Unreachable as exc:
        reattach = f"re-attach with `scalerl wait {exp_id}`"
        fail(f"cannot reach the server at {client.url}: {exc}; {reattach}", EXIT_UNREACHABLE)
    except ApiError as exc:
        if exc.status_code == 404:
            fail(f"experiment {exp_id} does not exist at {client.url}")
        refused(exc, client)
    if as_json:
        click.echo(json.dumps(verdict, indent=2, ensure_ascii=False))
    else:
        _report(verdict)
    code, why = outcome(verdict, statuses, conditions, timed_out)
    if why is not None:
        extra = f"; re-attach with `scalerl wait {exp_id}`" if timed_out else ""
        click.echo(f"{why}{extra}", err=True)
    sys.exit(code)


def _report(verdict: dict[str, Any]) -> None:
    from scalerl.cli.waiting import scorecard_line

    state = "decided" if verdict["decided"] else "not decided"
    version = verdict.get("assessment_version") or 0
    click.echo(
        f"verdict ({state}): best={verdict['best_run_name']} runner-up={verdict['runner_up_name']} "
        f"(assessment v{version})"
    )
    click.echo(f"  {verdict['reason']}")
    spread = verdict.get("work_spread")
    if spread:
        click.echo(f"  warning: {spread['warning']}")
    ablations = verdict.get("ablations") or []
    if ablations:
        click.echo("  leave-one-out, each removed component against the base recipe at the budget:")
        for a in ablations:
            click.echo(f"    {a['text']}")
    for r in verdict["ranking"]:
        a = "-" if r["A"] is None else f"{r['A']:.3f}"
        click.echo(f"  {r['run_name']}\tA={a}\t{r['fit_status']}")
    line = scorecard_line(verdict)
    if line is not None:
        click.echo(line)


def register(cli: click.Group) -> None:
    cli.add_command(submit_cmd)
    cli.add_command(wait_cmd)
