"""``scalerl sync DIR``: send runs kept offline (a Reporter that could not reach the service, or ``mode="offline"``)."""

from __future__ import annotations

from pathlib import Path

import click

from scalerl.cli.errors import connect, fail, refused
from scalerl.cli.exit_codes import EXIT_UNREACHABLE
from scalerl.cli.runs_cmds import TOKEN_OPTION, URL_OPTION


@click.command("sync")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@URL_OPTION
@TOKEN_OPTION
def sync_cmd(directory: Path | None, url: str | None, token: str | None) -> None:
    """Send the runs kept on disk in DIRECTORY (default: ~/.scalerl/offline, or SCALERL_OFFLINE_DIR): each folder's
    points and final status, exactly once (a synced folder is skipped; a sync cut short is simply run again). A
    folder whose trainer is still running is left alone; one whose trainer was killed ends its run 'lost'. Each
    offline run is a run of its own: two that share a name never merge."""
    from scalerl.client.api import ApiError, ServiceUnavailable
    from scalerl.client.offline import default_dir, sync_dir

    root = directory or default_dir()
    if not root.is_dir():
        fail(f"{root}: no such directory (a Reporter keeps runs it could not deliver in ~/.scalerl/offline)")
    client = connect(url, token)
    try:
        with client:
            results = sync_dir(client, root)
    except ApiError as exc:
        refused(exc, client, "sync: ")
    except ServiceUnavailable as exc:
        fail(f"sync: the service at {client.url} is unavailable ({exc}); nothing is lost, run it again later",
             EXIT_UNREACHABLE)  # fmt: skip
    if not results:
        click.echo(f"{root}: nothing to sync")
    failed = 0
    for r in results:
        if r.error:
            failed += 1
            click.echo(f"{r.folder.name}: refused: {r.error}")
        elif r.already:
            click.echo(f"{r.folder.name}: already synced (run {r.run_name}, id {r.run_id})")
        elif r.busy:
            click.echo(f"{r.folder.name}: its trainer is still writing it (run {r.run_name}): left for a later sync")
        else:
            skipped = f", {r.skipped_lines} unreadable lines skipped" if r.skipped_lines else ""
            refused_points = f", {r.refused} refused" if r.refused else ""
            click.echo(f"{r.folder.name}: run {r.run_name} (id {r.run_id}): {r.points} points ({r.stored} stored, "
                       f"{r.duplicates} already there{refused_points}), status {r.status}{skipped}")  # fmt: skip
    if failed:
        fail(f"{failed} of {len(results)} folders were refused")


def register(cli: click.Group) -> None:
    cli.add_command(sync_cmd)
