"""How every scalerl command reports bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

EXIT_BAD_INPUT = 2


def fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with code 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)
