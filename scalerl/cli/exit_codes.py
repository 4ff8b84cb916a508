"""The exit codes of the scalerl commands a script or CI job branches on (table: docs/api.md, "Exit codes").

Each value means one thing per command; ``1`` is the command's own "the check failed" (``fit``: no forecast could
be made; ``submit``/``wait``: a ``--fail-if`` condition holds).
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
"""Done: the forecast was made, or the verdict is decided (and no ``--fail-if`` condition holds)."""
EXIT_CONDITION: Final = 1
"""``submit``/``wait``: a ``--fail-if`` condition holds."""
EXIT_NO_FORECAST: Final = 1
"""``fit``: a file's forecast could not be made (too few points, the fit failed)."""
EXIT_BAD_INPUT: Final = 2
"""Bad input: a usage error, an unreadable file, a grid or request the service refused, an unknown experiment."""
EXIT_TIMEOUT: Final = 3
"""``submit --wait``/``wait``: ``--timeout`` passed while runs were still going and nothing was decided."""
EXIT_UNDECIDED: Final = 4
"""``submit --wait``/``wait``: every run finished and the verdict is not decided (e.g. low confidence)."""
EXIT_UNREACHABLE: Final = 5
"""The service could not be reached (connection error, timeout, 429 or 5xx) within ``--retry-for`` seconds."""
EXIT_AUTH: Final = 6
"""No API token, or the service refused it (401: unknown or revoked; 403: not allowed)."""
