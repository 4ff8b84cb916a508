"""scalerl: predictable RL post-training (command-line entry points live in :mod:`scalerl.cli`)."""

from importlib import metadata

__version__ = metadata.version("scalerl")
