"""Experiments for your own runs (by name, like W&B's project/group) and the control of runs trained elsewhere, from
a shell: ``scalerl experiment create|policy``, ``scalerl experiments``, ``scalerl runs``, ``scalerl stop``,
``scalerl finish``, ``scalerl resume`` and ``scalerl retry``."""

from __future__ import annotations

import math
from typing import Any

import click

from scalerl.cli.errors import connect, fail, refused
from scalerl.cli.exit_codes import EXIT_UNREACHABLE

URL_OPTION = click.option("--url", default=None, help="Server URL (default: SCALERL_URL or the saved credentials).")
TOKEN_OPTION = click.option(
    "--token", default=None, help="API token (default: SCALERL_TOKEN or the saved credentials)."
)


def _call(url: str | None, token: str | None, what: str, fn: Any) -> Any:
    """``fn(client)`` with the service's refusals and outages as one ``error:`` line (exit 2/6, or 5)."""
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
@click.option("--policy", "policy_items", multiple=True, metavar="KEY=VALUE",
              help="Decision policy: --policy mode=auto_stop --policy min_gain=0.05 (docs/decisions.md).")  # fmt: skip
@URL_OPTION
@TOKEN_OPTION
def experiment_create(name: str, compute_unit: str, budget: float | None, task: str | None, model: str | None,
                      description: str, exist_ok: bool, policy_items: tuple[str, ...], url: str | None,
                      token: str | None) -> None:  # fmt: skip
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
    policy = parse_policy(policy_items)
    exp = _call(url, token, f"experiment {name!r}", lambda api: api.ensure_experiment(
        name, compute_unit=compute_unit, budget=budget, task=task, model=model, description=description,
        exist_ok=exist_ok, policy=policy,
    ))  # fmt: skip
    click.echo(f"experiment {exp['name']} (id {exp['id']}): compute in {exp['document'].get('compute_unit')}, "
               f"{exp['n_runs']} runs, policy {exp['policy']}")  # fmt: skip


@experiment_group.command("policy")
@click.argument("experiment")
@click.argument("items", nargs=-1, metavar="KEY=VALUE...")
@URL_OPTION
@TOKEN_OPTION
def experiment_policy(experiment: str, items: tuple[str, ...], url: str | None, token: str | None) -> None:
    """Show the policy of EXPERIMENT (a name or an id), or replace it with KEY=VALUE settings (the others take their
    defaults), e.g. `scalerl experiment policy grpo-sweep mode=auto_stop`. The experiment is assessed again at once."""
    policy = parse_policy(items)

    def change(api: Any) -> Any:
        exp = _find_experiment(api, experiment)
        return exp if not items else api.set_policy(int(exp["id"]), policy or {})

    exp = _call(url, token, f"experiment {experiment}", change)
    settings = exp["document"].get("policy") or {}
    shown = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()) if k != "mode") or "the defaults"
    click.echo(f"experiment {exp['name']} (id {exp['id']}): policy {exp['policy']} ({shown})")


def parse_policy(items: tuple[str, ...]) -> dict[str, Any] | None:
    """``KEY=VALUE`` settings as the policy's JSON (values read as JSON: numbers, true/false, null; else text)."""
    from scalerl.cli.key_values import parse_key_values

    if not items:
        return None
    parsed = parse_key_values(items, "policy setting", "mode=auto_stop or min_gain=0.05")
    return {key: value for key, (value, _) in parsed.items()}


def _find_experiment(api: Any, experiment: str) -> dict[str, Any]:
    from scalerl.client.api import ScalerlError

    found = api.lookup_experiment(experiment)
    if found is None:
        raise ScalerlError(f"no experiment named {experiment!r} (see `scalerl experiments`)")
    return dict(found)


@click.command("experiments")
@URL_OPTION
@TOKEN_OPTION
def experiments_cmd(url: str | None, token: str | None) -> None:
    """List the experiments: id, name, policy, runs by status."""
    rows = _call(url, token, "experiments", lambda api: api.list_experiments())
    if not rows:
        click.echo("no experiments yet")
    for e in rows:
        counts = ", ".join(f"{n} {s}" for s, n in sorted((e.get("status_counts") or {}).items())) or "no runs"
        click.echo(f"{e['id']:>5}  {e['name']}  [{e.get('policy', 'recommend')}]  {counts}")


#: Fields of a listed run that ``--columns`` can add by name (beside tags, notes, config.KEY and summary.KEY).
RUN_FIELDS = ("task", "model", "seed", "budget", "attempts", "created_at", "started_at", "finished_at",
              "last_seen_at", "status_reason")  # fmt: skip
WHERE_HELP = "write config.KEY=VALUE or summary.KEY=VALUE (or tag=TAG), e.g. --where config.lr=0.001"


@click.command("runs")
@click.option("--experiment", help="Only the runs of this experiment (a name or an id).")
@click.option("--status", help="Only runs in this status (queued, running, lost, succeeded, ...).")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="Only runs having this tag (repeat: every one).")
@click.option("--where", "wheres", multiple=True, metavar="FIELD.KEY=VALUE",
              help="Only runs whose config or summary holds this value: --where config.lr=0.001 --where "
              "summary.best=0.8 (repeat: every one; a number matches as a number, 1e-3 = 0.001).")  # fmt: skip
@click.option("--sort", metavar="FIELD", help="Order by a run column (id, name, created_at, compute_used, status, "
              "...) or config.KEY / summary.KEY; -FIELD descending. Runs without the value last.")  # fmt: skip
@click.option("--columns", "columns", multiple=True, metavar="COL,COL",
              help=f"Add columns: tags, notes, config.KEY, summary.KEY or {', '.join(RUN_FIELDS)} (comma-separated "
              "or repeated). Tags are shown whenever a listed run has some.")  # fmt: skip
@URL_OPTION
@TOKEN_OPTION
def runs_cmd(experiment: str | None, status: str | None, tags: tuple[str, ...], wheres: tuple[str, ...],
             sort: str | None, columns: tuple[str, ...], url: str | None, token: str | None) -> None:  # fmt: skip
    """List runs: id, experiment, name, status, points, compute used, then the columns asked for.

    \b
    scalerl runs --experiment grpo-sweep --columns config.lr,summary.best --sort -summary.best
    scalerl runs --tag baseline --where config.loss=cispo --where config.lr=1e-6
    """
    params: dict[str, Any] = {"status": status} if status is not None else {}
    wanted_tags = [*tags]
    for item in wheres:
        field, value = parse_where(item)
        if field == "tag":
            wanted_tags.append(value)
        else:
            params.setdefault(field, []).append(value)
    if wanted_tags:
        params["tag"] = wanted_tags
    if sort is not None:
        if not sort.strip("-").strip():
            fail("--sort needs a field, e.g. --sort -summary.best or --sort created_at")
        params["sort"] = sort
    extra = parse_columns(columns)

    def listing(api: Any) -> Any:
        if experiment is not None:
            params["experiment_id"] = int(_find_experiment(api, experiment)["id"])
        return list_run_rows(api, params)

    rows = _call(url, token, "runs", listing)
    if not rows:
        click.echo("no runs")
        return
    if "tags" not in extra and any(r.get("tags") for r in rows):
        extra.insert(0, "tags")
    cells = [[f"{col}={cell_text(column_value(r, col))}" for col in extra] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(extra))]
    for r, line in zip(rows, cells, strict=True):
        head = (f"{r['id']:>6}  exp {r['experiment_id']:<4} {r['name']}  {r['status']}  {r.get('n_points') or 0} "
                f"points, compute {float(r.get('compute_used') or 0.0):.6g}")  # fmt: skip
        tail = "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        click.echo(f"{head}  {tail}" if tail else head)


def parse_where(item: str) -> tuple[str, str]:
    """``--where FIELD.KEY=VALUE`` as the REST filter ``(config.KEY | summary.KEY | tag, VALUE)``; anything else is
    one ``error:`` line saying what to write."""
    name, sep, value = item.partition("=")
    name = name.strip()
    if not sep:
        fail(f"--where {item!r}: no '='; {WHERE_HELP}")
    if name == "tag":
        if not value:
            fail(f"--where {item!r}: the tag is empty; {WHERE_HELP}")
        return name, value
    prefix, dot, key = name.partition(".")
    if prefix not in ("config", "summary") or not dot:
        fail(f"--where {item!r}: {name!r} is neither config.KEY nor summary.KEY; {WHERE_HELP}")
    if not key:
        fail(f"--where {item!r}: the {prefix} key is empty; {WHERE_HELP}")
    return name, value


def parse_columns(options: tuple[str, ...]) -> list[str]:
    """The ``--columns`` asked for, in order, once each; an unknown one is one ``error:`` line naming the allowed."""
    out: list[str] = []
    for option in options:
        for col in (c.strip() for c in option.split(",")):
            if not col:
                continue
            prefix, dot, key = col.partition(".")
            known = col in ("tags", "notes", *RUN_FIELDS) or (prefix in ("config", "summary") and dot and key)
            if not known:
                fail(f"--columns: unknown column {col!r}; allowed: tags, notes, config.KEY, summary.KEY, "
                     f"{', '.join(RUN_FIELDS)}")  # fmt: skip
            if col not in out:
                out.append(col)
    return out


def list_run_rows(api: Any, params: dict[str, Any], size: int = 1000) -> list[dict[str, Any]]:
    """Every run ``GET /api/v1/runs`` answers for ``params`` (page after page), as the service answers them."""
    rows: list[dict[str, Any]] = []
    while True:
        page = api.request("GET", "/api/v1/runs", params={**params, "limit": size, "offset": len(rows)})
        rows.extend(page)
        if len(page) < size:
            return rows


def column_value(run: dict[str, Any], column: str) -> Any:
    """A listed run's value of ``column`` (``config.KEY``: the flat key, else a path into nested values); None when
    it has none."""
    prefix, dot, key = column.partition(".")
    if dot and prefix in ("config", "summary"):
        data: Any = run.get(prefix) or {}
        if key in data:
            return data[key]
        for part in key.split("."):
            data = data.get(part) if isinstance(data, dict) else None
        return data
    return run.get(column)


def cell_text(value: Any) -> str:
    """A cell: tags joined by commas, numbers as JSON writes them, text as is; '-' for nothing."""
    import json

    if value is None or value == [] or value == "":
        return "-"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _find_run(api: Any, run: str, experiment: str | None) -> Any:
    """The run ``run``: an id (digits), else a name in ``experiment``, or in whichever experiment has a run of that
    name when only one has (several: an error naming them, to pick with --experiment)."""
    from scalerl.client.api import ScalerlError

    if run.isdigit():
        return api.run_info(int(run))
    if experiment is not None and api.find_experiment(experiment) is None:
        raise ScalerlError(f"no experiment named {experiment!r}")
    found = api.find_run_by_name(run, experiment)
    if found is None:
        where = f"experiment {experiment!r}" if experiment else "any experiment (see `scalerl runs`)"
        raise ScalerlError(f"no run named {run!r} in {where}")
    return found


@click.command("stop")
@click.argument("run")
@click.option("--experiment", help="The run's experiment, when RUN is a name used in several experiments.")
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
@click.option("--experiment", help="The run's experiment, when RUN is a name used in several experiments.")
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


def _requeue(command: str, doing: str) -> click.Command:
    @click.command(command)
    @click.argument("run")
    @click.option("--experiment", help="The run's experiment, when RUN is a name used in several experiments.")
    @click.option("--reason", default=f"{doing} with scalerl {command}", show_default=True)
    @URL_OPTION
    @TOKEN_OPTION
    def requeue(run: str, experiment: str | None, reason: str, url: str | None, token: str | None) -> None:
        def call(api: Any) -> Any:
            found = _find_run(api, run, experiment)
            return api.requeue_run(found.id, command, reason)

        info = _call(url, token, f"{command} {run}", call)
        click.echo(f"run {info.name} (id {info.id}): {info.status}; its trainer's next points start it again "
                   "(TRL: resume from the checkpoint; Reporter/ScalerlCallback: resume='allow')")  # fmt: skip

    return requeue


resume_cmd = _requeue("resume", "resumed")
resume_cmd.help = """Queue the stopped or succeeded run RUN (an id, or a name) again, e.g. after `scalerl stop` or to
train past its budget: grid runs are claimed by a worker; your own trainer's next points start it."""
retry_cmd = _requeue("retry", "retried")
retry_cmd.help = """Queue the failed or lost run RUN (an id, or a name) again: its next start is a new attempt."""


def register(cli: click.Group) -> None:
    for command in (experiment_group, experiments_cmd, runs_cmd, stop_cmd, finish_cmd, resume_cmd, retry_cmd):
        cli.add_command(command)
