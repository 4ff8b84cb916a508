"""Top-level click group. Each command lives in its own module and imports heavy dependencies lazily."""

from __future__ import annotations

import sys

import click

from scalerl import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="scalerl")
def cli() -> None:
    """scalerl: run RL post-training grids and forecast their compute-performance curves."""


def _register() -> None:
    """Attach every command module's commands (one line per module)."""
    from scalerl.cli import ci_cmds, demo_cmd, forecast_cmds, prior_cmds, replay_cmd, service_cmds

    forecast_cmds.register(cli)
    prior_cmds.register(cli)
    replay_cmd.register(cli)
    demo_cmd.register(cli)
    service_cmds.register(cli)
    ci_cmds.register(cli)
    from scalerl.cli import train_cmd

    train_cmd.register(cli)
    from scalerl.cli import worker_cmds

    worker_cmds.register(cli)
    from scalerl.cli import import_cmd, watch_cmd

    import_cmd.register(cli)
    watch_cmd.register(cli)
    from scalerl.cli import runs_cmds, sync_cmd

    runs_cmds.register(cli)
    sync_cmd.register(cli)


_register()


def main() -> None:
    """Console-script entry point. A shipped data file that is missing (a broken install) and a module of an extra
    that is not installed are one ``error:`` line naming the fix, from any command, not a traceback."""
    try:
        cli()
    except ImportError as exc:
        from scalerl.cli.extras import missing_extra

        advice = missing_extra(exc)
        if advice is None:
            raise
        from scalerl.cli.errors import fail

        fail(advice)
    except RuntimeError as exc:
        shipped = sys.modules.get("rl_core.scaling.fit.shipped")
        if shipped is not None and isinstance(exc, shipped.ShippedDataError):
            from scalerl.cli.errors import fail

            fail(str(exc))
        raise
