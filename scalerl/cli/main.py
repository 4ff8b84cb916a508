"""Top-level click group; sub-commands register themselves here."""

from __future__ import annotations

import click

from scalerl import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="scalerl")
def cli() -> None:
    """scalerl: run RL post-training grids and forecast their compute-performance curves."""


def main() -> None:
    """Console-script entry point."""
    cli()
