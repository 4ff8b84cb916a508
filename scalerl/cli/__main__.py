"""``python -m scalerl.cli``: the same as the ``scalerl`` command."""

from scalerl.cli.main import main

main()
