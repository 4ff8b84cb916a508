"""``scalerl worker`` (a production worker) and ``scalerl up`` (the embedded all-in-one)."""

from __future__ import annotations

import os

import click

from scalerl.cli.errors import fail, require_shipped_data

QUEUES = ("gpu", "cpu")


@click.command("worker")
@click.option("--queues", default="gpu", show_default=True, help="Comma-separated: gpu, cpu or gpu,cpu.")
@click.option("--name", default=None, help="Celery node name (default: <queues>@<hostname>).")
@click.option(
    "--supervise/--no-supervise",
    default=None,
    help="Run the supervisor (dispatch, automatic retries, alert deliveries); default on for the cpu queue.",
)
@click.option("--loglevel", default="INFO", show_default=True)
def worker_cmd(queues: str, name: str | None, supervise: bool | None, loglevel: str) -> None:
    """Run a Celery worker: one process per GPU for ``gpu`` (pin it with CUDA_VISIBLE_DEVICES), or the ``cpu``
    worker. Configuration comes from SCALERL_BROKER_URL, SCALERL_SERVER_URL, SCALERL_TOKEN, SCALERL_DATABASE_URL
    (cpu) and the other SCALERL_* worker settings."""
    chosen = [q.strip() for q in queues.split(",") if q.strip()]
    bad = [q for q in chosen if q not in QUEUES]
    if not chosen or bad:
        fail(f"--queues: unknown queue(s) {bad or [queues]}; choose from {list(QUEUES)}")
    require_shipped_data()
    from pydantic import ValidationError

    try:
        from worker import tasks

        cfg = tasks.settings()
    except ValidationError as exc:
        problems = [(".".join(map(str, e["loc"])) + ": " if e["loc"] else "") + e["msg"] for e in exc.errors()]
        fail("invalid worker settings: " + "; ".join(problems))
    if "gpu" in chosen and not cfg.token:
        fail("no API token: set SCALERL_TOKEN (write scope) or start `scalerl up`/`scalerl server` once")
    if supervise if supervise is not None else "cpu" in chosen:
        tasks.enable_supervisor()
    import logging

    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    node = name or f"{'-'.join(chosen)}-{os.getpid()}@%h"
    argv = ["worker", "-Q", ",".join(chosen), "-P", "solo", "-c", "1", "-n", node, "--loglevel", loglevel]
    argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    tasks.app.worker_main(argv)


@click.command("up")
@click.option("--port", type=int, default=None, help="Port (default 8765, or SCALERL_PORT).")
@click.option("--stop-grace", type=float, default=60.0, show_default=True, help="Seconds a run has to checkpoint.")
def up_cmd(port: int | None, stop_grace: float) -> None:
    """Start the embedded all-in-one on 127.0.0.1: server, workers, SQLite and a broker that needs no server.
    Ctrl-C stops everything; the next ``scalerl up`` resumes unfinished runs from their checkpoints."""
    from scalerl.cli.service_cmds import _settings

    if stop_grace <= 0:
        fail("--stop-grace must be positive")
    settings = _settings(port=port, host="127.0.0.1")
    require_shipped_data()
    from worker.embedded import UpError, run_up

    try:
        code = run_up(settings, click.echo, stop_grace)
    except UpError as exc:
        fail(str(exc))
    raise SystemExit(code)


def register(cli: click.Group) -> None:
    for command in (worker_cmd, up_cmd):
        cli.add_command(command)
