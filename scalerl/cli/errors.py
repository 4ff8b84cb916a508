"""How every scalerl command reports a failure: one ``error:`` line on stderr, an exit code, no traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from scalerl.cli.exit_codes import EXIT_BAD_INPUT

__all__ = ["EXIT_BAD_INPUT", "fail"]


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code`` (bad input, 2, unless told otherwise)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)
