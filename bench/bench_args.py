"""Argument helper shared by the bench scripts (imported as a sibling module: ``bench/`` is ``sys.path[0]``)."""

from __future__ import annotations

import argparse


def int_flags(parser: argparse.ArgumentParser, **defaults: int) -> None:
    """One integer flag per keyword, ``--name`` (underscores written as dashes) with that default: the sizes and
    counts a bench is run at."""
    for name, default in defaults.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
