"""The service's version: the installed ``scalerl`` distribution's, from package metadata (pyproject is the one
source; the service never imports the CLI package for it)."""

from __future__ import annotations

from importlib import metadata


def installed_version(dist: str = "scalerl") -> str:
    """The installed distribution's version, or ``0+unknown`` when it is not installed (a bare checkout)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "0+unknown"


VERSION = installed_version()
