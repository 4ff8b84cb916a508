"""The ``scalerl`` command. Each sub-command imports its heavy dependencies lazily."""

from scalerl.cli.main import main

__all__ = ["main"]
