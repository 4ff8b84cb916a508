"""``scalerl experiment create``, ``scalerl stop`` and ``scalerl finish``: experiments for your own runs (by name,
like W&B's project/group) and the control of runs trained elsewhere, from a shell."""

from __future__ import annotations

import math
from typing import Any

import click

from scalerl.cli.errors import fail
from scalerl.cli.exit_codes import EXIT_UNREACHABLE

URL_OPTION = click.option("--url", default=None, help="Server URL (default: SCALERL_URL or the saved credentials).")
TOKEN_OPTION = click.option(
    "--token", default=None, help="API token (default: SCALERL_TOKEN or the saved credentials)."
)


def _call(url: str | None, token: str | None, what: str, fn: Any) -> Any:
    """``fn(client)`` with the service's refusals and outages as one ``error:`` line (exit 2/6, or 5)."""
    from scalerl.cli.service_client import connect, refused
    from scalerl.client.api import ApiError, ScalerlError, ServiceUnavailable

    client = connect(url, token)
    try:
        with client:
            return fn(client)
    except ApiError as exc:
        refused(exc, client, f"{what}: ")
    except ServiceUnavailable as exc:
        fail(f"{what}: the service at {client.url} is unavailable ({exc})", EXIT_UNREACHABLE)
    except ScalerlError as exc:
        fail(f"{what}: {exc}")


@click.group("experiment")
def experiment_group() -> None:
    """Experiments for runs you train yourself (W&B's project/group)."""


@experiment_group.command("create")
@click.argument("name")
@click.option("--unit", "compute_unit", default="gpu_hours", show_default=True,
              help="The compute unit every run of it reports (gpu_hours, tokens, flops, step, ...).")  # fmt: skip
@click.option("--budget", type=float, help="The budget of runs registered without one (in the unit).")
@click.option("--task", help="A free-text task label (its runs inherit it).")
@click.option("--model", help="A free-text model label (its runs inherit it).")
@click.option("--description", default="", help="A line for people.")
@click.option("--exist-ok", is_flag=True, help="An experiment of that name (same unit) is fine: print it.")
@URL_OPTION
@TOKEN_OPTION
def experiment_create(name: str, compute_unit: str, budget: float | None, task: str | None, model: str | None,
                      description: str, exist_ok: bool, url: str | None, token: str | None) -> None:  # fmt: skip
    """Create the experiment NAME for runs trained elsewhere: no grid, no planned run. Runs join it with
    `ScalerlCallback(experiment=NAME)`, `Reporter.start(..., experiment=NAME)`, `scalerl watch/import --experiment
    NAME`.

    \b
    scalerl experiment create grpo-sweep --unit gpu_hours --budget 40 --task gsm8k --model qwen2.5-0.5b
    """
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        fail(f"--budget must be a finite number > 0, got {budget}")
    for option, value in (("--unit", compute_unit), ("--task", task), ("--model", model)):
        if value is not None and not value.strip():
            fail(f"{option} must not be empty")
    exp = _call(url, token, f"experiment {name!r}", lambda api: api.ensure_experiment(
        name, compute_unit=compute_unit, budget=budget, task=task, model=model, description=description,
        exist_ok=exist_ok,
    ))  # fmt: skip
    click.echo(f"experiment {exp['name']} (id {exp['id']}): compute in {exp['document'].get('compute_unit')}, "
               f"{exp['n_runs']} runs")  # fmt: skip


def _find_run(api: Any, run: str, experiment: str | None) -> Any:
    """The run ``run``: an id (digits), else a name in ``experiment`` (default: the experiment ``default``)."""
    from scalerl.client.api import ScalerlError

    if run.isdigit():
        return api.run_info(int(run))
    if experiment is not None and api.find_experiment(experiment) is None:
        raise ScalerlError(f"no experiment named {experiment!r}")
    found = api.find_run_by_name(run, experiment)
    if found is None:
        where = f"experiment {experiment!r}" if experiment else "the experiment 'default' (give --experiment NAME)"
        raise ScalerlError(f"no run named {run!r} in {where}")
    return found


@click.command("stop")
@click.argument("run")
@click.option("--experiment", help="The run's experiment, when RUN is a name (default: 'default').")
@click.option("--reason", default="requested with scalerl stop", show_default=True)
@URL_OPTION
@TOKEN_OPTION
def stop_cmd(run: str, experiment: str | None, reason: str, url: str | None, token: str | None) -> None:
    """Ask the run RUN (an id, or a name) to stop: its trainer's next answer says `stop` (the TRL callback saves a
    checkpoint and ends training; `scalerl watch` runs --on-stop). A queued run is stopped at once."""

    def stop(api: Any) -> Any:
        found = _find_run(api, run, experiment)
        return api.stop_run(found.id, reason)

    info = _call(url, token, f"stop {run}", stop)
    click.echo(f"run {info.name} (id {info.id}): {info.status}")


@click.command("finish")
@click.argument("run")
@click.option("--status", "status", type=click.Choice(["succeeded", "failed", "stopped"]), default="succeeded",
              show_default=True, help="How the run ended.")  # fmt: skip
@click.option("--experiment", help="The run's experiment, when RUN is a name (default: 'default').")
@click.option("--reason", default="", help="Why (default: 'reported with scalerl finish').")
@URL_OPTION
@TOKEN_OPTION
def finish_cmd(run: str, status: str, experiment: str | None, reason: str, url: str | None, token: str | None) -> None:
    """Report how the run RUN (an id, or a name) ended, e.g. a watched job after `scalerl watch` was interrupted,
    or a run left `stopping` by a job that stopped without saying so."""

    def finish(api: Any) -> Any:
        found = _find_run(api, run, experiment)
        if found.status == status:
            return found
        return api.report_status(found.id, status, reason or "reported with scalerl finish")

    info = _call(url, token, f"finish {run}", finish)
    click.echo(f"run {info.name} (id {info.id}): {info.status}")


def register(cli: click.Group) -> None:
    cli.add_command(experiment_group)
    cli.add_command(stop_cmd)
    cli.add_command(finish_cmd)
