"""scalerl: predictable RL post-training (command-line entry points live in :mod:`scalerl.cli`)."""

__version__ = "0.1.0"
